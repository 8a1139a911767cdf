"""Timestamps and ISO-8601 durations as the service reads them: one parser for every place that needs one.

OData ``datetime'...'`` literals, autoscale ``time("...")`` (which also takes RFC 1123 and reduced W3C-DTF
dates such as ``2025`` or ``2025-11``), ``ocp-date`` headers, and the durations of request bodies
(``PT15M``; a .NET TimeSpan underneath, so the service echoes them normalised and spells "no limit" as
TimeSpan.MaxValue).
"""

from __future__ import annotations

import functools
import re
from datetime import datetime, timedelta, timezone
from email.utils import parsedate_to_datetime

# -- timestamps --------------------------------------------------------------------------------

_ISO = re.compile(
    r"^([0-9]{4})(?:-([0-9]{2})(?:-([0-9]{2})"
    r"(?:[Tt ]([0-9]{2}):([0-9]{2})(?::([0-9]{2})(?:\.([0-9]+))?)?)?)?)?"
    r"(?:([Zz])|([+-])([0-9]{2}):?([0-9]{2}))?$"
)


def parse_iso_datetime(text: str, *, reduced: bool = False) -> datetime | None:
    """An aware datetime from ISO-8601 text, or ``None``.

    Hand-rolled rather than ``datetime.fromisoformat`` because the service writes 7-digit fractions (.NET
    ticks) and a ``Z`` suffix, which Python 3.10 does not read. Text without an offset is taken as UTC, the
    only zone the service uses. ``reduced`` also accepts a year or a year and month alone (W3C-DTF).
    """
    match = _ISO.match(text)
    if match is None:
        return None
    year, month, day, hour, minute, second, fraction, _zulu, sign, off_h, off_m = match.groups()
    if (month is None or day is None) and not reduced:
        return None
    tz = timezone.utc
    if sign:
        offset = timedelta(hours=int(off_h), minutes=int(off_m))
        tz = timezone(-offset if sign == "-" else offset)
    try:
        return datetime(
            int(year),
            int(month or 1),
            int(day or 1),
            int(hour or 0),
            int(minute or 0),
            int(second or 0),
            int((fraction or "0")[:6].ljust(6, "0")),
            tzinfo=tz,
        )
    except ValueError:
        return None


@functools.lru_cache(maxsize=256)
def parse_rfc1123(text: str) -> datetime | None:
    """``Wed, 26 Nov 2025 07:38:00 GMT`` as an aware datetime, or ``None``.

    Cached: every request carries one in ``ocp-date``, and requests of the same second carry the same one.
    """
    try:
        parsed = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if parsed is None:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def aware(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


# -- durations ---------------------------------------------------------------------------------

# TimeSpan.MaxValue: what the service reports for "no limit".
UNLIMITED_TEXT = "P10675199DT2H48M5.4775807S"
UNLIMITED = timedelta(days=10675199, hours=2, minutes=48, seconds=5, microseconds=477580)

_DURATION = re.compile(
    r"^P(?:(?P<weeks>[0-9]+)W)?(?:(?P<days>[0-9]+)D)?"
    r"(?:T(?:(?P<hours>[0-9]+)H)?(?:(?P<minutes>[0-9]+)M)?(?:(?P<seconds>[0-9]+(?:\.[0-9]+)?)S)?)?$"
)


class DurationError(ValueError):
    pass


def parse_duration(text: str) -> timedelta:
    match = _DURATION.match(text.strip()) if isinstance(text, str) else None
    if not match or text.strip() in ("P", "PT") or text.strip().endswith("T"):
        raise DurationError(f"{text!r} is not an ISO-8601 duration such as PT15M or P1DT2H")
    parts = {name: float(value) for name, value in match.groupdict().items() if value is not None}
    return timedelta(
        weeks=parts.get("weeks", 0),
        days=parts.get("days", 0),
        hours=parts.get("hours", 0),
        minutes=parts.get("minutes", 0),
        seconds=parts.get("seconds", 0),
    )


def is_unlimited(value: timedelta) -> bool:
    return value >= UNLIMITED


def format_duration(value: timedelta) -> str:
    """Normalise as the service echoes it back: ``PT06M00S`` becomes ``PT6M``."""
    if is_unlimited(value):
        return UNLIMITED_TEXT
    total_us = value.days * 86_400_000_000 + value.seconds * 1_000_000 + value.microseconds
    days, rest = divmod(total_us, 86_400_000_000)
    hours, rest = divmod(rest, 3_600_000_000)
    minutes, rest = divmod(rest, 60_000_000)
    seconds, micros = divmod(rest, 1_000_000)
    out = "P"
    if days:
        out += f"{days}D"
    time_part = ""
    if hours:
        time_part += f"{hours}H"
    if minutes:
        time_part += f"{minutes}M"
    if seconds or micros:
        time_part += f"{seconds}.{micros:06d}".rstrip("0").rstrip(".") + "S"
    if time_part:
        out += "T" + time_part
    return out if out != "P" else "PT0S"
