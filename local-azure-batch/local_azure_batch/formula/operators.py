"""The operators: arithmetic on doubles, doubleVecs, timeintervals and timestamps; comparisons; truth."""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from .errors import EVALUATION_ERROR, Failure
from .values import Interval, Value, type_name


def _divide(left: float, right: float) -> float:
    # IEEE semantics like the .NET service; Python would raise ZeroDivisionError.
    if right == 0:
        if left == 0 or math.isnan(left):
            return math.nan
        return math.copysign(math.inf, left) * math.copysign(1.0, right)
    return left / right


_NUMERIC: dict[str, Callable[[float, float], float]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": _divide,
}


def arithmetic(op: str, pos: int, left: Value, right: Value) -> Value:
    fn = _NUMERIC[op]
    try:
        if isinstance(left, float) and isinstance(right, float):
            return fn(left, right)
        if isinstance(left, tuple) and isinstance(right, tuple):
            if len(left) != len(right):
                raise Failure(
                    EVALUATION_ERROR,
                    pos,
                    f"operator '{op}' needs doubleVecs of the same length, not {len(left)} and {len(right)}",
                )
            return tuple(fn(a, b) for a, b in zip(left, right, strict=True))
        if isinstance(left, tuple) and isinstance(right, float):
            return tuple(fn(a, right) for a in left)
        if isinstance(left, float) and isinstance(right, tuple):
            return tuple(fn(left, b) for b in right)
        if isinstance(left, Interval):
            if isinstance(right, Interval) and op in "+-":
                return Interval(fn(left.seconds, right.seconds))
            if isinstance(right, float) and op in "*/":
                return Interval(fn(left.seconds, right))
            if isinstance(right, datetime) and op == "+":
                return right + timedelta(seconds=left.seconds)
        if isinstance(left, float) and isinstance(right, Interval) and op == "*":
            return Interval(left * right.seconds)
        if isinstance(left, datetime):
            if isinstance(right, Interval) and op in "+-":
                return left + timedelta(seconds=fn(0.0, right.seconds))
            if isinstance(right, datetime) and op == "-":
                return Interval((left - right).total_seconds())
    except OverflowError as exc:
        raise Failure(EVALUATION_ERROR, pos, f"operator '{op}' overflowed: {exc}") from None
    raise Failure(
        EVALUATION_ERROR,
        pos,
        f"operator '{op}' is not defined for a {type_name(left)} and a {type_name(right)}",
    )


def compare(op: str, pos: int, left: Value, right: Value) -> float:
    comparable = (
        (isinstance(left, float) and isinstance(right, float))
        or (isinstance(left, str) and isinstance(right, str))
        or (isinstance(left, datetime) and isinstance(right, datetime))
        or (isinstance(left, Interval) and isinstance(right, Interval))
    )
    if not comparable:
        raise Failure(
            EVALUATION_ERROR,
            pos,
            f"operator '{op}' cannot compare a {type_name(left)} with a {type_name(right)}",
        )
    a: Any = left.seconds if isinstance(left, Interval) else left
    b: Any = right.seconds if isinstance(right, Interval) else right
    if op == "==":
        result = a == b
    elif op == "!=":
        result = a != b
    elif op == "<":
        result = a < b
    elif op == "<=":
        result = a <= b
    elif op == ">":
        result = a > b
    else:
        result = a >= b
    return 1.0 if result else 0.0


def negate(op: str, pos: int, value: Value) -> Value:
    """Unary ``-`` (doubles, doubleVecs, timeintervals) and ``!`` (doubles)."""
    if op == "-":
        if isinstance(value, float):
            return -value
        if isinstance(value, Interval):
            return Interval(-value.seconds)
        if isinstance(value, tuple):
            return tuple(-item for item in value)
    elif isinstance(value, float):
        return 1.0 if value == 0 else 0.0
    raise Failure(EVALUATION_ERROR, pos, f"operator '{op}' is not defined for a {type_name(value)}")


def truth(value: Value, op: str, pos: int) -> bool:
    if not isinstance(value, float):
        raise Failure(EVALUATION_ERROR, pos, f"'{op}' needs a double condition, not a {type_name(value)}")
    return value != 0
