"""Times on the command line: ``--since``/``--until`` values in, timestamps and durations out. No I/O.

Every time is shown in UTC, the Batch service's zone. A time given without a zone is UTC too.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

from airflow_provider_azbatch.cli.command import UsageError

_AGO = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])", re.IGNORECASE)
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
TIME_FORMS = "an ISO 8601 time (2026-12-01T10:00:00Z) or a duration ago (90s, 15m, 2h, 3d)"


def parse_time(value: str, option: str, now: datetime | None = None) -> datetime:
    """``2026-12-01T10:00:00Z``, ``2026-12-01 10:00`` (UTC), ``2026-12-01`` or ``15m`` (ago): an aware datetime."""
    text = value.strip()
    ago = _AGO.fullmatch(text)
    if ago:
        now = now or datetime.now(timezone.utc)
        return now - timedelta(seconds=float(ago.group(1)) * _UNITS[ago.group(2).lower()])
    iso = text[:-1] + "+00:00" if text[-1:] in ("Z", "z") else text
    try:
        parsed = datetime.fromisoformat(iso)
    except ValueError:
        raise UsageError(f"{option} {value!r} is not a time: give {TIME_FORMS}") from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=timezone.utc)


def time_window(
    since: str | None, until: str | None, now: datetime | None = None
) -> tuple[datetime | None, datetime | None]:
    """``--since`` and ``--until`` parsed, checked to be in order."""
    now = now or datetime.now(timezone.utc)
    start = parse_time(since, "--since", now) if since else None
    end = parse_time(until, "--until", now) if until else None
    if start is not None and end is not None and end < start:
        raise UsageError(f"--until ({format_time(end)}) is before --since ({format_time(start)})")
    return start, end


def format_time(value: datetime | None) -> str:
    """``2026-12-01T10:00:05Z`` (UTC, whole seconds), or empty."""
    if value is None:
        return ""
    return value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def iso_time(value: datetime | None) -> str | None:
    """The exact time for JSON and YAML: ISO 8601 in UTC."""
    if value is None:
        return None
    return value.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def format_duration(seconds: float | None) -> str:
    """``0.4s``, ``12.0s``, ``3m 05s``, ``2h 03m``, ``3d 04h``; empty when unknown."""
    if seconds is None:
        return ""
    if seconds < 60:
        return f"{seconds:.1f}s"
    whole = int(seconds)
    minutes, secs = divmod(whole, 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days}d {hours:02d}h"
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m {secs:02d}s"


def seconds_between(start: datetime | None, end: datetime | None) -> float | None:
    return (end - start).total_seconds() if start is not None and end is not None else None
