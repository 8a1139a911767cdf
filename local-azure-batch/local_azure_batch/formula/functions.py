"""The built-in functions: avg, ceil, floor, len, lg, ln, log, max, min, norm, percentile, rand, range,
round, std, stop, sum, time and val."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from datetime import datetime

from local_azure_batch.lang.times import parse_iso_datetime, parse_rfc1123

from .errors import EVALUATION_ERROR, Failure, Stop
from .values import Value, format_number, type_name


def _vector_list(name: str, pos: int, args: list[Value]) -> list[float]:
    """A doubleVecList: any mix of doubles and doubleVecs, flattened into one vector."""
    flat: list[float] = []
    for arg in args:
        if isinstance(arg, float):
            flat.append(arg)
        elif isinstance(arg, tuple):
            flat.extend(arg)
        else:
            raise Failure(EVALUATION_ERROR, pos, f"{name}() takes doubles and doubleVecs, not a {type_name(arg)}")
    return flat


def _non_empty(name: str, pos: int, values: list[float]) -> list[float]:
    if not values:
        raise Failure(EVALUATION_ERROR, pos, f"{name}() of an empty doubleVec")
    return values


def _safe_log(fn: Callable[[float], float]) -> Callable[[float], float]:
    def log(value: float) -> float:
        # IEEE results instead of Python's ValueError: log(0) is -Infinity, log(-1) is NaN.
        if math.isnan(value) or value < 0:
            return math.nan
        if value == 0:
            return -math.inf
        return fn(value)

    return log


def _finite_only(fn: Callable[[float], int]) -> Callable[[float], float]:
    def rounded(value: float) -> float:
        return float(fn(value)) if math.isfinite(value) else value

    return rounded


_ELEMENTWISE: dict[str, Callable[[float], float]] = {
    "lg": _safe_log(math.log2),
    "ln": _safe_log(math.log),
    "log": _safe_log(math.log10),
    "ceil": _finite_only(math.ceil),
    "floor": _finite_only(math.floor),
    # Banker's rounding, as .NET's Math.Round does by default (and Python's round()).
    "round": _finite_only(round),
}


def _percentile(pos: int, values: list[float], percent: float) -> float:
    if math.isnan(percent) or not 0 <= percent <= 100:
        raise Failure(
            EVALUATION_ERROR,
            pos,
            f"percentile() needs a percentage between 0 and 100, not {format_number(percent)}",
        )
    ordered = sorted(_non_empty("percentile", pos, values))
    # Nearest rank: the smallest value with at least p% of the values at or below it.
    rank = math.ceil(percent / 100 * len(ordered))
    return ordered[max(rank, 1) - 1]


def _std(values: list[float]) -> float:
    if len(values) < 2:
        return 0.0
    mean = math.fsum(values) / len(values)
    return math.sqrt(math.fsum((value - mean) ** 2 for value in values) / (len(values) - 1))


# Functions of a doubleVecList returning a double; the bool says whether an empty list is an error.
_AGGREGATES: dict[str, tuple[Callable[[list[float]], float], bool]] = {
    "avg": (lambda values: math.fsum(values) / len(values), True),
    "sum": (math.fsum, False),
    "len": (lambda values: float(len(values)), False),
    "max": (max, True),
    "min": (min, True),
    "range": (lambda values: max(values) - min(values), True),
    "norm": (lambda values: math.sqrt(math.fsum(value * value for value in values)), False),
    "std": (_std, True),
}


def call_function(name: str, pos: int, args: list[Value], now: datetime) -> Value:
    """``name(args)``; the parser has checked that the function exists and the number of arguments."""
    if name in _ELEMENTWISE:
        fn = _ELEMENTWISE[name]
        if len(args) == 1 and isinstance(args[0], float):
            return fn(args[0])
        return tuple(fn(value) for value in _vector_list(name, pos, args))
    if name in _AGGREGATES:
        aggregate, needs_values = _AGGREGATES[name]
        values = _vector_list(name, pos, args)
        return aggregate(_non_empty(name, pos, values) if needs_values else values)
    if name == "percentile":
        vector, percent = args
        if not isinstance(percent, float):
            raise Failure(EVALUATION_ERROR, pos, f"percentile() needs a double percentage, not a {type_name(percent)}")
        return _percentile(pos, _vector_list(name, pos, [vector]), percent)
    if name == "val":
        return _val(pos, *args)
    if name == "rand":
        return random.random()
    if name == "stop":
        raise Stop
    return _time(pos, args, now)


def _val(pos: int, vector: Value, index: Value) -> float:
    if not isinstance(vector, (tuple, float)) or not isinstance(index, float):
        raise Failure(
            EVALUATION_ERROR,
            pos,
            f"val() takes a doubleVec and a double index, not a {type_name(vector)} and a {type_name(index)}",
        )
    values = vector if isinstance(vector, tuple) else (vector,)
    if not math.isfinite(index) or not 0 <= int(index) < len(values):
        raise Failure(
            EVALUATION_ERROR,
            pos,
            f"val(): index {format_number(index)} is outside a doubleVec of length {len(values)}",
        )
    return values[int(index)]


def _time(pos: int, args: list[Value], now: datetime) -> datetime:
    if not args or args[0] == "":
        return now
    text = args[0]
    if not isinstance(text, str):
        raise Failure(EVALUATION_ERROR, pos, f"time() takes a string, not a {type_name(text)}")
    # time("...") reads W3C-DTF (an ISO 8601 profile, so a year alone is a date) and RFC 1123, per the docs.
    parsed = parse_iso_datetime(text.strip(), reduced=True) or parse_rfc1123(text.strip())
    if parsed is None:
        raise Failure(EVALUATION_ERROR, pos, f'time(): "{text}" is neither a W3C-DTF nor an RFC 1123 date')
    return parsed
