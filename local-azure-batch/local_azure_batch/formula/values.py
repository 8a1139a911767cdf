"""The values a formula computes with (double, doubleVec, timeinterval, timestamp, string) and how results show them."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any


@dataclass(frozen=True)
class Interval:
    """A timeinterval; seconds as a float so TimeInterval_100ns survives arithmetic."""

    seconds: float


# double | doubleVec | timeinterval | timestamp | string
Value = float | tuple[float, ...] | Interval | datetime | str


def type_name(value: Any) -> str:
    if isinstance(value, float):
        return "double"
    if isinstance(value, tuple):
        return "doubleVec"
    if isinstance(value, Interval):
        return "timeinterval"
    if isinstance(value, datetime):
        return "timestamp"
    return "string"


def format_number(value: float) -> str:
    """Like .NET's double.ToString(): integers without decimals, NaN and Infinity by name."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return repr(value).replace("e", "E")


def _format_timestamp(value: datetime) -> str:
    # As in the documented results: $curTime=2016-10-13T19:18:47.805Z
    value = value.astimezone(timezone.utc)
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


def _format_interval(value: Interval) -> str:
    # A guess at the service's rendering: .NET TimeSpan's constant format, [-][d.]hh:mm:ss[.fffffff].
    ticks = round(value.seconds * 10_000_000)
    sign = "-" if ticks < 0 else ""
    ticks = abs(ticks)
    seconds, fraction = divmod(ticks, 10_000_000)
    minutes, second = divmod(seconds, 60)
    hours, minute = divmod(minutes, 60)
    days, hour = divmod(hours, 24)
    text = f"{sign}{f'{days}.' if days else ''}{hour:02d}:{minute:02d}:{second:02d}"
    return text + (f".{fraction:07d}" if fraction else "")


def format_value(value: Value) -> str:
    if isinstance(value, float):
        return format_number(value)
    if isinstance(value, tuple):
        return "[" + ",".join(format_number(item) for item in value) + "]"
    if isinstance(value, Interval):
        return _format_interval(value)
    if isinstance(value, datetime):
        return _format_timestamp(value)
    return value
