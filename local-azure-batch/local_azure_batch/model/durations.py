"""ISO-8601 durations the way the Batch service (a .NET TimeSpan underneath) reads and writes them."""

from __future__ import annotations

import re
from datetime import timedelta

# TimeSpan.MaxValue: what the service reports for "no limit".
UNLIMITED_TEXT = "P10675199DT2H48M5.4775807S"
UNLIMITED = timedelta(days=10675199, hours=2, minutes=48, seconds=5, microseconds=477580)

_PATTERN = re.compile(
    r"^P(?:(?P<weeks>\d+)W)?(?:(?P<days>\d+)D)?"
    r"(?:T(?:(?P<hours>\d+)H)?(?:(?P<minutes>\d+)M)?(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?$"
)


class DurationError(ValueError):
    pass


def parse_duration(text: str) -> timedelta:
    match = _PATTERN.match(text.strip()) if isinstance(text, str) else None
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
