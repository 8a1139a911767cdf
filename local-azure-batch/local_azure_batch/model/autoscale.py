"""Azure Batch autoscale formulas, evaluated the way the Batch service evaluates them.

The language is documented at https://learn.microsoft.com/azure/batch/batch-automatic-scaling.
This module implements the documented subset listed in :data:`SUPPORTED_SUMMARY`; everything else
fails with an :class:`AutoScaleFormulaError` that names the construct, so a formula is never
half-understood. Where the documentation is silent the choice made is stated next to the code.

Errors carry the service's ``code`` / ``message`` / ``values`` triple, with the detail in a single
``Message`` value prefixed by ``Line L, Col C:`` (1-based), as in the service's own example::

    {"code": "InsufficientSampleData",
     "message": "Autoscale evaluation failed due to insufficient sample data",
     "values": [{"name": "Message", "value": "Line 15, Col 44: Insufficient data from data set:
                                              $RunningTasks wanted 70%, received 50%"}]}
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from email.utils import parsedate_to_datetime
from typing import Any, Protocol

__all__ = [
    "EVALUATION_ERROR",
    "FORMULA_TOO_LONG",
    "INSUFFICIENT_SAMPLE_DATA",
    "MAX_FORMULA_LENGTH",
    "MAX_STATEMENTS",
    "NOT_SUPPORTED",
    "SAMPLED_VARIABLES",
    "SUPPORTED_SUMMARY",
    "SYNTAX_ERROR",
    "AutoScaleFormulaError",
    "AutoScaleOutcome",
    "Sample",
    "SampleHistory",
    "evaluate_formula",
    "validate_formula",
]

# --- Error codes -----------------------------------------------------------------------------
# Documented by the service (REST error table and the pool autoscale event example).
SYNTAX_ERROR = "AutoScalingFormulaSyntaxError"
INSUFFICIENT_SAMPLE_DATA = "InsufficientSampleData"
# The Batch SDKs' error-code constants spell it this way (the REST table says AutoScalingFormulaTooLong).
FORMULA_TOO_LONG = "AutoScaleFormulaTooLong"
# A guess: the service's code for other evaluation failures is not documented.
EVALUATION_ERROR = "AutoScaleFormulaEvaluationError"
# Ours: the real service would evaluate these; the local one cannot.
NOT_SUPPORTED = "AutoScaleFormulaNotSupportedLocally"

_MESSAGES = {
    SYNTAX_ERROR: "The specified auto-scaling formula has a syntax error.",
    FORMULA_TOO_LONG: "The specified auto-scaling formula exceeds lengths limit.",
    INSUFFICIENT_SAMPLE_DATA: "Autoscale evaluation failed due to insufficient sample data",
    EVALUATION_ERROR: "Autoscale evaluation failed due to an error in the formula",
    NOT_SUPPORTED: "The autoscale formula uses a feature that the local Batch service does not support",
}

# "The formula string cannot exceed 8 KB" (docs); the SDKs document 8192 characters.
MAX_FORMULA_LENGTH = 8192
MAX_STATEMENTS = 100

# --- Service-defined variables ---------------------------------------------------------------
_TARGET_DEDICATED = "$TargetDedicatedNodes"
_TARGET_LOW_PRIORITY = "$TargetLowPriorityNodes"
_DEALLOCATION = "$NodeDeallocationOption"
_WRITABLE = (_TARGET_DEDICATED, _TARGET_LOW_PRIORITY, _DEALLOCATION)
# Documented aliases; "the value assigned to the fully named variable will take precedence".
_ALIASES = {"$TargetDedicated": _TARGET_DEDICATED, "$TargetLowPriority": _TARGET_LOW_PRIORITY}

#: Variables whose history the service model records; read them with GetSample() and friends.
SAMPLED_VARIABLES = (
    "$ActiveTasks",
    "$RunningTasks",
    "$PendingTasks",
    "$SucceededTasks",
    "$FailedTasks",
    "$CurrentDedicatedNodes",
    "$CurrentLowPriorityNodes",
    "$PreemptedNodeCount",
    "$UsableNodeCount",
)
# Readable as plain numbers: the docs use "$CurrentDedicatedNodes * 1.1" directly.
_SCALAR_READ_ONLY = ("$CurrentDedicatedNodes", "$CurrentLowPriorityNodes", "$TaskSlotsPerNode")
# Node resource metrics: the local service runs tasks as processes and measures none of these.
_RESOURCE_METRICS = (
    "$CPUPercent",
    "$WallClockSeconds",
    "$MemoryBytes",
    "$DiskBytes",
    "$DiskReadBytes",
    "$DiskWriteBytes",
    "$DiskReadOps",
    "$DiskWriteOps",
    "$NetworkInBytes",
    "$NetworkOutBytes",
    "$SampleNodeCount",
)
_READ_ONLY = frozenset(SAMPLED_VARIABLES) | frozenset(_SCALAR_READ_ONLY) | frozenset(_RESOURCE_METRICS)
_SERVICE_NAMES = {
    name.lower(): name for name in (*_WRITABLE, *_ALIASES, *_READ_ONLY)
}  # for "did you mean" on a wrong case

_DEALLOCATION_OPTIONS = ("requeue", "terminate", "taskcompletion", "retaineddata")

_SECONDS_PER_DAY = 86_400.0
_TIME_INTERVALS = {
    "TimeInterval_Zero": 0.0,
    "TimeInterval_100ns": 1e-7,
    "TimeInterval_Microsecond": 1e-6,
    "TimeInterval_Millisecond": 1e-3,
    "TimeInterval_Second": 1.0,
    "TimeInterval_Minute": 60.0,
    "TimeInterval_Hour": 3_600.0,
    "TimeInterval_Day": _SECONDS_PER_DAY,
    "TimeInterval_Week": 7 * _SECONDS_PER_DAY,
    "TimeInterval_Year": 365 * _SECONDS_PER_DAY,
}

# name -> (min args, max args or None for a doubleVecList)
_FUNCTIONS: dict[str, tuple[int, int | None]] = {
    "avg": (1, None),
    "ceil": (1, None),
    "floor": (1, None),
    "len": (1, None),
    "lg": (1, None),
    "ln": (1, None),
    "log": (1, None),
    "max": (1, None),
    "min": (1, None),
    "norm": (1, None),
    "percentile": (2, 2),
    "rand": (0, 0),
    "range": (1, None),
    "round": (1, None),
    "std": (1, None),
    "stop": (0, 0),
    "sum": (1, None),
    "time": (0, 1),
    "val": (2, 2),
}
_METHODS: dict[str, tuple[int, int]] = {
    "GetSample": (1, 3),
    "GetSamplePercent": (1, 2),
    "GetSamplePeriod": (0, 0),
    "Count": (0, 0),
    "HistoryBeginTime": (0, 0),
}
_TIMESTAMP_MEMBERS = ("year", "month", "day", "weekday", "hour", "minute", "second")

SUPPORTED_SUMMARY = """\
Autoscale formulas (local Batch service)

Supported:
- Statements separated by ';' (a trailing ';' and blank statements are fine), line breaks,
  // line comments and /* block */ comments. At most 8192 characters and 100 statements.
- Assignments to user variables (with or without a leading '$') and to $TargetDedicatedNodes,
  $TargetLowPriorityNodes (aliases $TargetDedicated, $TargetLowPriority) and
  $NodeDeallocationOption (requeue, terminate, taskcompletion, retaineddata).
- Types double, doubleVec, timeinterval (TimeInterval_Zero/100ns/Microsecond/Millisecond/Second/
  Minute/Hour/Day/Week/Year), timestamp (time(), time("2025-01-01T00:00:00Z"), RFC 1123 strings;
  members year, month, day, weekday, hour, minute, second) and "double-quoted" strings.
- Operators + - * / (doubles, doubleVec element-wise, timeinterval and timestamp arithmetic),
  unary - and !, < <= > >= == != (giving 1 or 0), && ||, c ? a : b, parentheses.
- Functions avg, ceil, floor, len, lg, ln, log, max, min, norm, percentile, rand, range, round,
  std, stop, sum, time, val; the list functions take any mix of doubles and doubleVecs.
- Sampled variables $ActiveTasks, $RunningTasks, $PendingTasks, $SucceededTasks, $FailedTasks,
  $CurrentDedicatedNodes, $CurrentLowPriorityNodes, $PreemptedNodeCount, $UsableNodeCount with
  GetSample(count | interval [, percent] | start, end [, percent]), GetSamplePercent(interval |
  start, end), GetSamplePeriod(), Count(), HistoryBeginTime(). Samples are taken every sample
  period of the local service (not necessarily 30 s) and percentages are computed against it.
- $CurrentDedicatedNodes, $CurrentLowPriorityNodes and $TaskSlotsPerNode also read as plain numbers.

Not supported (the formula is rejected with an error naming the construct):
- Node resource metrics: $CPUPercent, $WallClockSeconds, $MemoryBytes, $DiskBytes, $DiskReadBytes,
  $DiskWriteBytes, $DiskReadOps, $DiskWriteOps, $NetworkInBytes, $NetworkOutBytes, $SampleNodeCount.
- Undocumented functions (abs, vec, ...), the % operator, vector literals and indexing with [].
- A sampled task or node-count variable used without a method ($PendingTasks instead of
  $PendingTasks.GetSample(1)).

Local choices where the documentation is silent: stop() ends evaluation and keeps what was
assigned so far; GetSample(count) returns the samples there are (at least one is required);
std() of one value is 0; percentile() uses the nearest-rank method; timestamp.weekday counts
Sunday as 0; user variables are listed in the results sorted by name, as in the service's example.
"""


# --- Public types ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    at: datetime
    value: float


class SampleHistory(Protocol):
    def samples(self, variable: str) -> Sequence[Sample]:
        """Samples of ``variable`` (e.g. ``"$PendingTasks"``), oldest first."""
        ...


@dataclass
class AutoScaleOutcome:
    target_dedicated_nodes: int
    target_low_priority_nodes: int
    node_deallocation_option: str
    results: str


class AutoScaleFormulaError(Exception):
    """A formula the service would reject or fail to evaluate, in the AutoScaleRun.error shape."""

    def __init__(self, code: str, message: str, values: Sequence[tuple[str, str]] = ()) -> None:
        self.code = code
        self.message = message
        self.values = list(values)
        detail = "; ".join(value for _name, value in self.values)
        super().__init__(f"{code}: {message}" + (f" ({detail})" if detail else ""))

    def to_error_body(self) -> dict[str, Any]:
        """The JSON of ``AutoScaleRun.error``."""
        return {
            "code": self.code,
            "message": self.message,
            "values": [{"name": name, "value": value} for name, value in self.values],
        }


# --- Values --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Interval:
    """A timeinterval; seconds as a float so TimeInterval_100ns survives arithmetic."""

    seconds: float


# double | doubleVec | timeinterval | timestamp | string
_Value = float | tuple | _Interval | datetime | str


def _type_name(value: Any) -> str:
    if isinstance(value, float):
        return "double"
    if isinstance(value, tuple):
        return "doubleVec"
    if isinstance(value, _Interval):
        return "timeinterval"
    if isinstance(value, datetime):
        return "timestamp"
    return "string"


class _Failure(Exception):
    """Raised inside the evaluator; carries the position so the driver can add Line/Col."""

    def __init__(self, code: str, pos: int | None, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.pos = pos
        self.detail = detail


class _Stop(Exception):
    """stop() was called."""


# --- Formatting ----------------------------------------------------------------------------------


def _format_number(value: float) -> str:
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


def _format_interval(value: _Interval) -> str:
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


def _format_value(value: _Value) -> str:
    if isinstance(value, float):
        return _format_number(value)
    if isinstance(value, tuple):
        return "[" + ",".join(_format_number(item) for item in value) + "]"
    if isinstance(value, _Interval):
        return _format_interval(value)
    if isinstance(value, datetime):
        return _format_timestamp(value)
    return value


# --- Dates ---------------------------------------------------------------------------------------

_W3C_DTF = re.compile(
    r"^(\d{4})(?:-(\d{2})(?:-(\d{2})"
    r"(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d+))?)?)?)?)?"
    r"(?:([Zz])|([+-])(\d{2}):?(\d{2}))?$"
)


def _parse_datetime(text: str) -> datetime | None:
    """time("...") accepts W3C-DTF (ISO 8601 profile) and RFC 1123, per the docs."""
    text = text.strip()
    match = _W3C_DTF.match(text)
    if match is not None:
        year, month, day, hour, minute, second, fraction, _zulu, sign, off_h, off_m = match.groups()
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
    try:
        parsed = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if parsed is None:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


# --- Lexer ---------------------------------------------------------------------------------------


class _Token:
    __slots__ = ("kind", "pos", "text", "value")

    def __init__(self, kind: str, text: str, pos: int, value: Any = None) -> None:
        # kind: number | string | name | var | op | end
        self.kind = kind
        self.text = text
        self.pos = pos
        self.value = value


_NUMBER = re.compile(r"(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TWO_CHAR_OPS = ("==", "!=", "<=", ">=", "&&", "||")
_ONE_CHAR_OPS = "+-*/!<>?:(),.;="
_BAD_CHARS = {
    "%": "'%' is not an autoscale operator",
    "&": "'&' is not an autoscale operator; use '&&'",
    "|": "'|' is not an autoscale operator; use '||'",
    "[": "vector literals and indexing with '[' are not part of the autoscale language; use val(v, i)",
    "]": "vector literals and indexing with ']' are not part of the autoscale language; use val(v, i)",
    "'": "strings are written in double quotes",
}


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
            continue
        if text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise _Failure(SYNTAX_ERROR, i, "unterminated /* comment")
            i = end + 2
            continue
        if "0" <= ch <= "9" or (ch == "." and i + 1 < n and "0" <= text[i + 1] <= "9"):
            match = _NUMBER.match(text, i)
            assert match is not None  # starts with a digit
            end = match.end()
            if end < n and (text[end].isalnum() or text[end] == "_"):
                raise _Failure(SYNTAX_ERROR, i, f"malformed number '{text[i : end + 1]}'")
            tokens.append(_Token("number", match.group(), i, float(match.group())))
            i = end
            continue
        if ch == '"':
            value, end = _read_string(text, i)
            tokens.append(_Token("string", text[i:end], i, value))
            i = end
            continue
        if ch == "$":
            match = _NAME.match(text, i + 1)
            if match is None:
                raise _Failure(SYNTAX_ERROR, i, "expected a variable name after '$'")
            tokens.append(_Token("var", "$" + match.group(), i))
            i = match.end()
            continue
        match = _NAME.match(text, i)
        if match is not None:
            tokens.append(_Token("name", match.group(), i))
            i = match.end()
            continue
        two = text[i : i + 2]
        if two in _TWO_CHAR_OPS:
            tokens.append(_Token("op", two, i))
            i += 2
            continue
        if ch in _ONE_CHAR_OPS:
            tokens.append(_Token("op", ch, i))
            i += 1
            continue
        raise _Failure(SYNTAX_ERROR, i, _BAD_CHARS.get(ch, f"unexpected character '{ch}'"))
    tokens.append(_Token("end", "", n))
    return tokens


def _read_string(text: str, start: int) -> tuple[str, int]:
    out: list[str] = []
    i = start + 1
    while i < len(text):
        ch = text[i]
        if ch == '"':
            return "".join(out), i + 1
        if ch == "\\" and i + 1 < len(text):
            out.append(text[i + 1])
            i += 2
            continue
        out.append(ch)
        i += 1
    raise _Failure(SYNTAX_ERROR, start, "unterminated string literal")


# --- Syntax tree ---------------------------------------------------------------------------------


class _Node:
    __slots__ = ("pos",)

    def __init__(self, pos: int) -> None:
        self.pos = pos

    def evaluate(self, run: _Run) -> _Value:
        raise NotImplementedError


class _Constant(_Node):
    __slots__ = ("value",)

    def __init__(self, pos: int, value: _Value) -> None:
        super().__init__(pos)
        self.value = value

    def evaluate(self, run: _Run) -> _Value:
        return self.value


class _UserVariable(_Node):
    __slots__ = ("name",)

    def __init__(self, pos: int, name: str) -> None:
        super().__init__(pos)
        self.name = name

    def evaluate(self, run: _Run) -> _Value:
        # The parser only builds this after an assignment to the name, and statements always run
        # in order, so the value is there.
        return run.user_values[self.name]


class _ServiceVariable(_Node):
    __slots__ = ("name",)

    def __init__(self, pos: int, name: str) -> None:
        super().__init__(pos)
        self.name = name

    def evaluate(self, run: _Run) -> _Value:
        return run.read_service_variable(self.name)


class _MethodCall(_Node):
    __slots__ = ("args", "method", "variable")

    def __init__(self, pos: int, variable: str, method: str, args: list[_Node]) -> None:
        super().__init__(pos)
        self.variable = variable
        self.method = method
        self.args = args

    def evaluate(self, run: _Run) -> _Value:
        args = [arg.evaluate(run) for arg in self.args]
        return run.call_method(self, args)


class _FunctionCall(_Node):
    __slots__ = ("args", "name")

    def __init__(self, pos: int, name: str, args: list[_Node]) -> None:
        super().__init__(pos)
        self.name = name
        self.args = args

    def evaluate(self, run: _Run) -> _Value:
        args = [arg.evaluate(run) for arg in self.args]
        return _call_function(self, args, run)


class _Member(_Node):
    __slots__ = ("member", "target")

    def __init__(self, pos: int, target: _Node, member: str) -> None:
        super().__init__(pos)
        self.target = target
        self.member = member

    def evaluate(self, run: _Run) -> _Value:
        value = self.target.evaluate(run)
        if not isinstance(value, datetime):
            raise _Failure(EVALUATION_ERROR, self.pos, f"'.{self.member}' needs a timestamp, not a {_type_name(value)}")
        value = value.astimezone(timezone.utc)
        if self.member == "weekday":
            # Documented only as "1 for Monday"; Sunday is taken as 0 like .NET's DayOfWeek.
            return float(value.isoweekday() % 7)
        return float(getattr(value, self.member))


class _Unary(_Node):
    __slots__ = ("op", "operand")

    def __init__(self, pos: int, op: str, operand: _Node) -> None:
        super().__init__(pos)
        self.op = op
        self.operand = operand

    def evaluate(self, run: _Run) -> _Value:
        value = self.operand.evaluate(run)
        if self.op == "-":
            if isinstance(value, float):
                return -value
            if isinstance(value, _Interval):
                return _Interval(-value.seconds)
            if isinstance(value, tuple):
                return tuple(-item for item in value)
        elif isinstance(value, float):
            return 1.0 if value == 0 else 0.0
        raise _Failure(EVALUATION_ERROR, self.pos, f"operator '{self.op}' is not defined for a {_type_name(value)}")


class _Binary(_Node):
    __slots__ = ("left", "op", "right")

    def __init__(self, pos: int, op: str, left: _Node, right: _Node) -> None:
        super().__init__(pos)
        self.op = op
        self.left = left
        self.right = right

    def evaluate(self, run: _Run) -> _Value:
        left = self.left.evaluate(run)
        right = self.right.evaluate(run)
        if self.op in "+-*/":
            return _arithmetic(self, left, right)
        return _compare(self, left, right)


class _Logical(_Node):
    __slots__ = ("left", "op", "right")

    def __init__(self, pos: int, op: str, left: _Node, right: _Node) -> None:
        super().__init__(pos)
        self.op = op
        self.left = left
        self.right = right

    def evaluate(self, run: _Run) -> _Value:
        left = _truth(self.left.evaluate(run), self.op, self.left.pos)
        # Short-circuits like C, so "percent >= 70 && avg(...)" never reads missing samples.
        if self.op == "&&" and not left:
            return 0.0
        if self.op == "||" and left:
            return 1.0
        return 1.0 if _truth(self.right.evaluate(run), self.op, self.right.pos) else 0.0


class _Ternary(_Node):
    __slots__ = ("condition", "if_false", "if_true")

    def __init__(self, pos: int, condition: _Node, if_true: _Node, if_false: _Node) -> None:
        super().__init__(pos)
        self.condition = condition
        self.if_true = if_true
        self.if_false = if_false

    def evaluate(self, run: _Run) -> _Value:
        # Only the chosen branch runs: the documented example relies on it to skip
        # avg($PendingTasks.GetSample(...)) when too few samples are present.
        if _truth(self.condition.evaluate(run), "?", self.condition.pos):
            return self.if_true.evaluate(run)
        return self.if_false.evaluate(run)


class _Statement:
    __slots__ = ("expression", "pos", "target")

    def __init__(self, pos: int, target: str | None, expression: _Node) -> None:
        self.pos = pos
        self.target = target
        self.expression = expression


def _truth(value: _Value, op: str, pos: int) -> bool:
    if not isinstance(value, float):
        raise _Failure(EVALUATION_ERROR, pos, f"'{op}' needs a double condition, not a {_type_name(value)}")
    return value != 0


# --- Operators -----------------------------------------------------------------------------------


def _divide(left: float, right: float) -> float:
    # IEEE semantics like the .NET service; Python would raise ZeroDivisionError.
    if right == 0:
        if left == 0 or math.isnan(left):
            return math.nan
        return math.copysign(math.inf, left) * math.copysign(1.0, right)
    return left / right


_NUMERIC_OPS: dict[str, Callable[[float, float], float]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": _divide,
}


def _arithmetic(node: _Binary, left: _Value, right: _Value) -> _Value:
    op = node.op
    fn = _NUMERIC_OPS[op]
    try:
        if isinstance(left, float) and isinstance(right, float):
            return fn(left, right)
        if isinstance(left, tuple) and isinstance(right, tuple):
            if len(left) != len(right):
                raise _Failure(
                    EVALUATION_ERROR,
                    node.pos,
                    f"operator '{op}' needs doubleVecs of the same length, not {len(left)} and {len(right)}",
                )
            return tuple(fn(a, b) for a, b in zip(left, right, strict=True))
        if isinstance(left, tuple) and isinstance(right, float):
            return tuple(fn(a, right) for a in left)
        if isinstance(left, float) and isinstance(right, tuple):
            return tuple(fn(left, b) for b in right)
        if isinstance(left, _Interval):
            if isinstance(right, _Interval) and op in "+-":
                return _Interval(fn(left.seconds, right.seconds))
            if isinstance(right, float) and op in "*/":
                return _Interval(fn(left.seconds, right))
            if isinstance(right, datetime) and op == "+":
                return right + timedelta(seconds=left.seconds)
        if isinstance(left, float) and isinstance(right, _Interval) and op == "*":
            return _Interval(left * right.seconds)
        if isinstance(left, datetime):
            if isinstance(right, _Interval) and op in "+-":
                return left + timedelta(seconds=fn(0.0, right.seconds))
            if isinstance(right, datetime) and op == "-":
                return _Interval((left - right).total_seconds())
    except OverflowError as exc:
        raise _Failure(EVALUATION_ERROR, node.pos, f"operator '{op}' overflowed: {exc}") from None
    raise _Failure(
        EVALUATION_ERROR,
        node.pos,
        f"operator '{op}' is not defined for a {_type_name(left)} and a {_type_name(right)}",
    )


def _compare(node: _Binary, left: _Value, right: _Value) -> float:
    comparable = (
        (isinstance(left, float) and isinstance(right, float))
        or (isinstance(left, str) and isinstance(right, str))
        or (isinstance(left, datetime) and isinstance(right, datetime))
        or (isinstance(left, _Interval) and isinstance(right, _Interval))
    )
    if not comparable:
        raise _Failure(
            EVALUATION_ERROR,
            node.pos,
            f"operator '{node.op}' cannot compare a {_type_name(left)} with a {_type_name(right)}",
        )
    a: Any = left.seconds if isinstance(left, _Interval) else left
    b: Any = right.seconds if isinstance(right, _Interval) else right
    op = node.op
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


# --- Functions -----------------------------------------------------------------------------------


def _vector_list(node: _FunctionCall, args: list[_Value]) -> list[float]:
    """A doubleVecList: any mix of doubles and doubleVecs, flattened into one vector."""
    flat: list[float] = []
    for arg in args:
        if isinstance(arg, float):
            flat.append(arg)
        elif isinstance(arg, tuple):
            flat.extend(arg)
        else:
            raise _Failure(
                EVALUATION_ERROR,
                node.pos,
                f"{node.name}() takes doubles and doubleVecs, not a {_type_name(arg)}",
            )
    return flat


def _non_empty(node: _FunctionCall, values: list[float]) -> list[float]:
    if not values:
        raise _Failure(EVALUATION_ERROR, node.pos, f"{node.name}() of an empty doubleVec")
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


def _percentile(node: _FunctionCall, values: list[float], percent: float) -> float:
    if math.isnan(percent) or not 0 <= percent <= 100:
        raise _Failure(
            EVALUATION_ERROR,
            node.pos,
            f"percentile() needs a percentage between 0 and 100, not {_format_number(percent)}",
        )
    ordered = sorted(_non_empty(node, values))
    # Nearest rank: the smallest value with at least p% of the values at or below it.
    rank = math.ceil(percent / 100 * len(ordered))
    return ordered[max(rank, 1) - 1]


def _call_function(node: _FunctionCall, args: list[_Value], run: _Run) -> _Value:
    name = node.name
    if name in _ELEMENTWISE:
        fn = _ELEMENTWISE[name]
        if len(args) == 1 and isinstance(args[0], float):
            return fn(args[0])
        return tuple(fn(value) for value in _vector_list(node, args))
    if name == "avg":
        values = _non_empty(node, _vector_list(node, args))
        return math.fsum(values) / len(values)
    if name == "sum":
        return math.fsum(_vector_list(node, args))
    if name == "len":
        return float(len(_vector_list(node, args)))
    if name == "max":
        return max(_non_empty(node, _vector_list(node, args)))
    if name == "min":
        return min(_non_empty(node, _vector_list(node, args)))
    if name == "range":
        values = _non_empty(node, _vector_list(node, args))
        return max(values) - min(values)
    if name == "norm":
        return math.sqrt(math.fsum(value * value for value in _vector_list(node, args)))
    if name == "std":
        values = _non_empty(node, _vector_list(node, args))
        if len(values) < 2:
            return 0.0
        mean = math.fsum(values) / len(values)
        return math.sqrt(math.fsum((value - mean) ** 2 for value in values) / (len(values) - 1))
    if name == "percentile":
        vector, percent = args
        if not isinstance(percent, float):
            raise _Failure(
                EVALUATION_ERROR,
                node.pos,
                f"percentile() needs a double percentage, not a {_type_name(percent)}",
            )
        return _percentile(node, _vector_list(node, [vector]), percent)
    if name == "val":
        vector, index = args
        if not isinstance(vector, (tuple, float)) or not isinstance(index, float):
            raise _Failure(
                EVALUATION_ERROR,
                node.pos,
                f"val() takes a doubleVec and a double index, not a {_type_name(vector)} and a {_type_name(index)}",
            )
        values = vector if isinstance(vector, tuple) else (vector,)
        if not math.isfinite(index) or not 0 <= int(index) < len(values):
            raise _Failure(
                EVALUATION_ERROR,
                node.pos,
                f"val(): index {_format_number(index)} is outside a doubleVec of length {len(values)}",
            )
        return values[int(index)]
    if name == "rand":
        return random.random()
    if name == "stop":
        raise _Stop
    # time()
    if not args or args[0] == "":
        return run.now
    text = args[0]
    if not isinstance(text, str):
        raise _Failure(EVALUATION_ERROR, node.pos, f"time() takes a string, not a {_type_name(text)}")
    parsed = _parse_datetime(text)
    if parsed is None:
        raise _Failure(EVALUATION_ERROR, node.pos, f'time(): "{text}" is neither a W3C-DTF nor an RFC 1123 date')
    return parsed


# --- Parser --------------------------------------------------------------------------------------


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokenize(text)
        self.index = 0
        self.assigned: set[str] = set()

    @property
    def current(self) -> _Token:
        return self.tokens[self.index]

    def peek(self, offset: int = 1) -> _Token:
        return self.tokens[min(self.index + offset, len(self.tokens) - 1)]

    def advance(self) -> _Token:
        token = self.tokens[self.index]
        if token.kind != "end":
            self.index += 1
        return token

    def at_op(self, *ops: str) -> bool:
        token = self.current
        return token.kind == "op" and token.text in ops

    def expect_op(self, op: str, context: str) -> _Token:
        if not self.at_op(op):
            raise _Failure(SYNTAX_ERROR, self.current.pos, f"expected '{op}' {context} but found {self._found()}")
        return self.advance()

    def _found(self) -> str:
        token = self.current
        if token.kind == "end" or (token.kind == "op" and token.text == ";"):
            return "the end of the statement"
        return f"'{token.text}'"

    def parse_program(self) -> list[_Statement]:
        statements: list[_Statement] = []
        while True:
            while self.at_op(";"):
                self.advance()
            if self.current.kind == "end":
                return statements
            if len(statements) == MAX_STATEMENTS:
                raise _Failure(
                    FORMULA_TOO_LONG,
                    self.current.pos,
                    f"the formula has more than {MAX_STATEMENTS} statements",
                )
            statements.append(self.parse_statement())
            if not self.at_op(";") and self.current.kind != "end":
                if self.at_op("="):
                    raise _Failure(
                        SYNTAX_ERROR,
                        self.current.pos,
                        "only a variable can be assigned; use '==' to compare",
                    )
                raise _Failure(
                    SYNTAX_ERROR,
                    self.current.pos,
                    f"expected ';' or an operator but found {self._found()}",
                )

    def parse_statement(self) -> _Statement:
        token = self.current
        if token.kind in ("name", "var") and self.peek().kind == "op" and self.peek().text == "=":
            target = self.assignment_target(token)
            self.advance()
            self.advance()
            if target == _DEALLOCATION:
                self.check_deallocation_option()
            expression = self.parse_expression()
            self.assigned.add(target)
            return _Statement(token.pos, target, expression)
        return _Statement(token.pos, None, self.parse_expression())

    def assignment_target(self, token: _Token) -> str:
        name = token.text
        if token.kind == "var":
            if name in _WRITABLE or name in _ALIASES:
                return name
            if name in _READ_ONLY:
                raise _Failure(
                    SYNTAX_ERROR,
                    token.pos,
                    f"{name} is a read-only service-defined variable and cannot be assigned",
                )
            self.check_case(token)
            return name
        if name in _TIME_INTERVALS:
            raise _Failure(SYNTAX_ERROR, token.pos, f"{name} is a constant and cannot be assigned")
        return name

    def check_deallocation_option(self) -> None:
        # "$NodeDeallocationOption = requeu" would otherwise read as an unassigned variable.
        value = self.current
        follower = self.peek()
        is_bare_word = value.kind == "name" and (follower.kind == "end" or follower.text == ";")
        if is_bare_word and value.text not in self.assigned and value.text.lower() not in _DEALLOCATION_OPTIONS:
            raise _Failure(
                SYNTAX_ERROR,
                value.pos,
                f"'{value.text}' is not a node deallocation option; use one of {', '.join(_DEALLOCATION_OPTIONS)}",
            )

    def check_case(self, token: _Token) -> None:
        proper = _SERVICE_NAMES.get(token.text.lower())
        if proper is not None and proper != token.text:
            raise _Failure(
                SYNTAX_ERROR,
                token.pos,
                f"unknown variable {token.text}: names are case-sensitive, did you mean {proper}?",
            )

    # expression := or ('?' expression ':' expression)?
    def parse_expression(self) -> _Node:
        condition = self.parse_binary(0)
        if self.at_op("?"):
            question = self.advance()
            if_true = self.parse_expression()
            self.expect_op(":", f"after the '?' at {self.describe_pos(question.pos)}")
            if_false = self.parse_expression()
            return _Ternary(question.pos, condition, if_true, if_false)
        return condition

    _LEVELS: tuple[tuple[str, ...], ...] = (
        ("||",),
        ("&&",),
        ("==", "!="),
        ("<", "<=", ">", ">="),
        ("+", "-"),
        ("*", "/"),
    )

    def parse_binary(self, level: int) -> _Node:
        if level == len(self._LEVELS):
            return self.parse_unary()
        ops = self._LEVELS[level]
        left = self.parse_binary(level + 1)
        while self.at_op(*ops):
            op_token = self.advance()
            if self.current.kind == "end" or self.at_op(";", ")", ",", ":"):
                raise _Failure(SYNTAX_ERROR, self.current.pos, f"expected a value after '{op_token.text}'")
            right = self.parse_binary(level + 1)
            node_type = _Logical if op_token.text in ("&&", "||") else _Binary
            left = node_type(op_token.pos, op_token.text, left, right)
        return left

    def parse_unary(self) -> _Node:
        if self.at_op("-", "!"):
            op_token = self.advance()
            operand = self.parse_unary()
            if op_token.text == "-" and isinstance(operand, _Constant) and isinstance(operand.value, float):
                return _Constant(op_token.pos, -operand.value)
            return _Unary(op_token.pos, op_token.text, operand)
        return self.parse_postfix()

    def parse_postfix(self) -> _Node:
        node = self.parse_primary()
        while self.at_op("."):
            dot = self.advance()
            member = self.current
            if member.kind != "name":
                raise _Failure(SYNTAX_ERROR, member.pos, f"expected a member name after '.' but found {self._found()}")
            self.advance()
            if self.at_op("("):
                raise _Failure(
                    SYNTAX_ERROR,
                    member.pos,
                    f"{member.text}() is a method of the sampled service variables "
                    f"({', '.join(SAMPLED_VARIABLES)}) only",
                )
            if member.text not in _TIMESTAMP_MEMBERS:
                raise _Failure(
                    SYNTAX_ERROR,
                    member.pos,
                    f"unknown member '.{member.text}' (a timestamp has {', '.join(_TIMESTAMP_MEMBERS)})",
                )
            node = _Member(dot.pos, node, member.text)
        return node

    def parse_primary(self) -> _Node:
        token = self.current
        if token.kind == "number":
            self.advance()
            return _Constant(token.pos, token.value)
        if token.kind == "string":
            self.advance()
            return _Constant(token.pos, token.value)
        if token.kind == "var":
            self.advance()
            return self.parse_service_or_user_variable(token)
        if token.kind == "name":
            self.advance()
            if self.at_op("("):
                return self.parse_call(token)
            return self.parse_name(token)
        if self.at_op("("):
            self.advance()
            inner = self.parse_expression()
            self.expect_op(")", f"to close the '(' at {self.describe_pos(token.pos)}")
            return inner
        if self.at_op("="):
            raise _Failure(SYNTAX_ERROR, token.pos, "unexpected '='; use '==' to compare")
        if token.kind == "end" or self.at_op(";"):
            raise _Failure(SYNTAX_ERROR, token.pos, "expected a value but the statement ended")
        raise _Failure(SYNTAX_ERROR, token.pos, f"expected a value but found '{token.text}'")

    def parse_service_or_user_variable(self, token: _Token) -> _Node:
        name = token.text
        self.check_case(token)
        if name in _RESOURCE_METRICS:
            raise _Failure(
                NOT_SUPPORTED,
                token.pos,
                f"{name} is not supported by the local Batch service, which records no node resource "
                f"metrics; use the task and node-count variables ({', '.join(SAMPLED_VARIABLES)})",
            )
        is_method_call = self.at_op(".") and self.peek().kind == "name" and self.peek(2).text == "("
        if is_method_call:
            return self.parse_method_call(token)
        if name in _WRITABLE or name in _ALIASES or name in _SCALAR_READ_ONLY:
            return _ServiceVariable(token.pos, name)
        if name in SAMPLED_VARIABLES:
            raise _Failure(
                SYNTAX_ERROR,
                token.pos,
                f"{name} is a sampled service variable; read it with a method, "
                f"e.g. {name}.GetSample(1) or {name}.GetSample(TimeInterval_Minute * 5)",
            )
        return self.user_variable(token)

    def parse_method_call(self, variable: _Token) -> _Node:
        self.advance()  # .
        method = self.advance()
        if variable.text not in SAMPLED_VARIABLES:
            raise _Failure(
                SYNTAX_ERROR,
                method.pos,
                f"{variable.text} has no sample history, so it has no {method.text}() method "
                f"(sampled variables: {', '.join(SAMPLED_VARIABLES)})",
            )
        if method.text not in _METHODS:
            known = ", ".join(_METHODS)
            raise _Failure(SYNTAX_ERROR, method.pos, f"unknown method {method.text}() (sampled variables have {known})")
        args = self.parse_arguments(method.text)
        low, high = _METHODS[method.text]
        if not low <= len(args) <= high:
            wanted = str(low) if low == high else f"{low} to {high}"
            raise _Failure(
                SYNTAX_ERROR,
                method.pos,
                f"{method.text}() takes {wanted} argument{'s' if high != 1 else ''}, got {len(args)}",
            )
        return _MethodCall(variable.pos, variable.text, method.text, args)

    def parse_call(self, name_token: _Token) -> _Node:
        name = name_token.text
        if name not in _FUNCTIONS:
            proper = next((known for known in _FUNCTIONS if known == name.lower()), None)
            if proper is not None:
                hint = f"; names are case-sensitive, did you mean {proper}()?"
            else:
                hint = f" (supported: {', '.join(sorted(_FUNCTIONS))})"
            raise _Failure(SYNTAX_ERROR, name_token.pos, f"unknown function '{name}'{hint}")
        args = self.parse_arguments(name)
        low, high = _FUNCTIONS[name]
        if len(args) < low or (high is not None and len(args) > high):
            if high is None:
                wanted = f"at least {low} argument{'s' if low != 1 else ''}"
            elif low == high:
                wanted = f"{low} argument{'s' if low != 1 else ''}"
            else:
                wanted = f"{low} to {high} arguments"
            raise _Failure(SYNTAX_ERROR, name_token.pos, f"{name}() takes {wanted}, got {len(args)}")
        return _FunctionCall(name_token.pos, name, args)

    def parse_arguments(self, name: str) -> list[_Node]:
        opening = self.expect_op("(", f"after {name}")
        args: list[_Node] = []
        if self.at_op(")"):
            self.advance()
            return args
        while True:
            args.append(self.parse_expression())
            if self.at_op(","):
                self.advance()
                continue
            if self.at_op(")"):
                self.advance()
                return args
            raise _Failure(
                SYNTAX_ERROR,
                self.current.pos,
                f"expected ',' or ')' in the call to {name}() opened at "
                f"{self.describe_pos(opening.pos)} but found {self._found()}",
            )

    def parse_name(self, token: _Token) -> _Node:
        name = token.text
        if name in _TIME_INTERVALS:
            return _Constant(token.pos, _Interval(_TIME_INTERVALS[name]))
        if name in self.assigned:
            return _UserVariable(token.pos, name)
        lowered = name.lower()
        if lowered in _DEALLOCATION_OPTIONS:
            return _Constant(token.pos, lowered)
        if lowered.startswith("timeinterval_"):
            proper = next((known for known in _TIME_INTERVALS if known.lower() == lowered), None)
            hint = f"names are case-sensitive, did you mean {proper}?" if proper else "the constants are "
            if proper is None:
                hint += ", ".join(_TIME_INTERVALS)
            raise _Failure(SYNTAX_ERROR, token.pos, f"unknown time interval '{name}': {hint}")
        return self.user_variable(token)

    def user_variable(self, token: _Token) -> _Node:
        if token.text not in self.assigned:
            raise _Failure(
                SYNTAX_ERROR,
                token.pos,
                f"variable '{token.text}' is used before it is assigned",
            )
        return _UserVariable(token.pos, token.text)

    def describe_pos(self, pos: int) -> str:
        line, col = _line_col(self.text, pos)
        return f"line {line}, col {col}"


def _line_col(text: str, pos: int) -> tuple[int, int]:
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return line, col


# --- Evaluation ----------------------------------------------------------------------------------


class _Run:
    def __init__(
        self,
        history: SampleHistory,
        now: datetime,
        current: Mapping[str, float],
        sample_period: timedelta,
    ) -> None:
        self.history = history
        self.now = _aware(now)
        self.current = current
        self.sample_period = sample_period.total_seconds()
        self.user_values: dict[str, _Value] = {}
        self.service_values: dict[str, _Value] = {}
        self.alias_values: dict[str, _Value] = {}
        self.assigned_at: dict[str, int] = {}
        self._samples: dict[str, list[tuple[datetime, float]]] = {}

    # Service variables start at their current values and change as the formula assigns them.
    def current_number(self, name: str, default: float) -> float:
        value = self.current.get(name, self.current.get(name.lstrip("$")))
        return default if value is None else float(value)

    def read_service_variable(self, name: str) -> _Value:
        name = _ALIASES.get(name, name)
        if name in self.service_values:
            return self.service_values[name]
        alias = next((alias for alias, full in _ALIASES.items() if full == name), None)
        if alias is not None and alias in self.alias_values:
            return self.alias_values[alias]
        if name == _DEALLOCATION:
            return "requeue"
        if name in SAMPLED_VARIABLES:
            samples = self.samples(name)
            fallback = samples[-1][1] if samples else 0.0
            return self.current_number(name, fallback)
        if name == "$TaskSlotsPerNode":
            return self.current_number(name, 1.0)
        return self.current_number(name, 0.0)

    def assign(self, statement: _Statement, value: _Value) -> None:
        target = statement.target
        assert target is not None
        if target == _DEALLOCATION:
            if not isinstance(value, str) or value.lower() not in _DEALLOCATION_OPTIONS:
                shown = value if isinstance(value, str) else f"a {_type_name(value)}"
                raise _Failure(
                    EVALUATION_ERROR,
                    statement.pos,
                    f"{_DEALLOCATION} must be one of {', '.join(_DEALLOCATION_OPTIONS)}, not {shown}",
                )
            self.service_values[target] = value.lower()
            return
        if target in _WRITABLE or target in _ALIASES:
            if not isinstance(value, float):
                raise _Failure(
                    EVALUATION_ERROR,
                    statement.pos,
                    f"{target} must be assigned a double, not a {_type_name(value)}",
                )
            store = self.alias_values if target in _ALIASES else self.service_values
            store[target] = value
            self.assigned_at[target] = statement.pos
            return
        self.user_values[target] = value

    def samples(self, variable: str) -> list[tuple[datetime, float]]:
        cached = self._samples.get(variable)
        if cached is None:
            cached = []
            for sample in self.history.samples(variable):
                at = _aware(sample.at)
                if at <= self.now:
                    cached.append((at, float(sample.value)))
            self._samples[variable] = cached
        return cached

    def bound(self, node: _MethodCall, value: _Value) -> datetime:
        """A look-back interval or a timestamp as an absolute time."""
        if isinstance(value, _Interval):
            return self.now - timedelta(seconds=value.seconds)
        if isinstance(value, datetime):
            return _aware(value)
        raise _Failure(
            EVALUATION_ERROR,
            node.pos,
            f"{node.variable}.{node.method}() takes a timeinterval or a timestamp here, not a {_type_name(value)}",
        )

    def window(self, node: _MethodCall, args: list[_Value]) -> tuple[list[float], float]:
        """Values inside (start, end] and their percentage of the samples expected there."""
        ends = [self.bound(node, arg) for arg in args]
        if len(ends) == 1:
            ends.append(self.now)
        start, end = min(ends), max(ends)
        values = [value for at, value in self.samples(node.variable) if start < at <= end]
        expected = max(1, math.floor((end - start).total_seconds() / self.sample_period + 1e-9))
        return values, min(100.0, 100.0 * len(values) / expected)

    def call_method(self, node: _MethodCall, args: list[_Value]) -> _Value:
        method = node.method
        if method == "Count":
            return float(len(self.samples(node.variable)))
        if method == "GetSamplePeriod":
            return _Interval(self.sample_period)
        if method == "HistoryBeginTime":
            samples = self.samples(node.variable)
            if not samples:
                raise _Failure(
                    INSUFFICIENT_SAMPLE_DATA,
                    node.pos,
                    f"Insufficient data from data set: {node.variable} has no samples yet",
                )
            return samples[0][0]
        if method == "GetSamplePercent":
            return self.window(node, args)[1]
        # GetSample
        if len(args) == 1 and isinstance(args[0], float):
            return self.last_samples(node, args[0])
        percent = 0.0
        if len(args) >= 2 and isinstance(args[-1], float):
            percent = args[-1]
            args = args[:-1]
            if math.isnan(percent) or not 0 <= percent <= 100:
                raise _Failure(
                    EVALUATION_ERROR,
                    node.pos,
                    f"{node.variable}.GetSample() needs a sample percentage between 0 and 100, "
                    f"not {_format_number(percent)}",
                )
        if len(args) > 2:
            raise _Failure(
                EVALUATION_ERROR,
                node.pos,
                f"{node.variable}.GetSample() takes (count), (start[, percent]) or (start, end[, percent])",
            )
        values, received = self.window(node, args)
        if received < percent:
            raise _Failure(
                INSUFFICIENT_SAMPLE_DATA,
                node.pos,
                f"Insufficient data from data set: {node.variable} wanted {_format_number(percent)}%, "
                f"received {math.floor(received)}%",
            )
        return tuple(values)

    def last_samples(self, node: _MethodCall, count: float) -> tuple[float, ...]:
        # "GetSample(double count): the number of samples to obtain from the most recent".
        if not math.isfinite(count) or int(count) < 1:
            raise _Failure(
                EVALUATION_ERROR,
                node.pos,
                f"{node.variable}.GetSample() needs a count of at least 1, not {_format_number(count)}",
            )
        samples = self.samples(node.variable)
        if not samples:
            # Undocumented. Failing (rather than returning []) keeps a pool from scaling on no data:
            # max(0, min(4, [])) would otherwise read as 4.
            raise _Failure(
                INSUFFICIENT_SAMPLE_DATA,
                node.pos,
                f"Insufficient data from data set: {node.variable} wanted {int(count)} "
                f"sample{'s' if int(count) != 1 else ''}, received 0",
            )
        return tuple(value for _at, value in samples[-int(count) :])

    def final_target(self, name: str) -> int:
        value = self.read_service_variable(name)
        assert isinstance(value, float)
        if not math.isfinite(value):
            alias = next(alias for alias, full in _ALIASES.items() if full == name)
            pos = self.assigned_at.get(name, self.assigned_at.get(alias))
            raise _Failure(
                EVALUATION_ERROR,
                pos,
                f"{name} evaluated to {_format_number(value)}; a target node count must be a finite number",
            )
        # Negative targets mean none; fractional ones are truncated like a cast to int.
        return int(max(0.0, value))


def _parse(formula: str) -> list[_Statement]:
    if len(formula) > MAX_FORMULA_LENGTH:
        raise _Failure(
            FORMULA_TOO_LONG,
            None,
            f"The formula is {len(formula)} characters long; the limit is {MAX_FORMULA_LENGTH}",
        )
    return _Parser(formula).parse_program()


def _to_error(formula: str, failure: _Failure) -> AutoScaleFormulaError:
    detail = failure.detail
    if failure.pos is not None:
        line, col = _line_col(formula, failure.pos)
        detail = f"Line {line}, Col {col}: {detail}"
    return AutoScaleFormulaError(failure.code, _MESSAGES[failure.code], [("Message", detail)])


def validate_formula(formula: str) -> None:
    """Reject a formula the way enabling autoscale does: length, statement count, syntax, support."""
    try:
        _parse(formula)
    except _Failure as failure:
        raise _to_error(formula, failure) from None


def evaluate_formula(
    formula: str,
    history: SampleHistory,
    *,
    now: datetime,
    current: Mapping[str, float],
    sample_period: timedelta = timedelta(seconds=30),
) -> AutoScaleOutcome:
    """Run ``formula`` once, as an autoscale evaluation at ``now``.

    ``current`` holds the pool's present values (``$TargetDedicatedNodes``,
    ``$CurrentDedicatedNodes``, ...); service variables start from them. ``sample_period`` is how
    often ``history`` is sampled, which is what sample percentages are measured against.
    """
    if sample_period <= timedelta(0):
        raise ValueError("sample_period must be positive")
    try:
        program = _parse(formula)
        run = _Run(history, now, current, sample_period)
        try:
            for statement in program:
                value = statement.expression.evaluate(run)
                if statement.target is not None:
                    run.assign(statement, value)
        except _Stop:
            pass
        dedicated = run.final_target(_TARGET_DEDICATED)
        low_priority = run.final_target(_TARGET_LOW_PRIORITY)
    except _Failure as failure:
        raise _to_error(formula, failure) from None
    option = run.read_service_variable(_DEALLOCATION)
    assert isinstance(option, str)
    parts = [
        f"{_TARGET_DEDICATED}={dedicated}",
        f"{_TARGET_LOW_PRIORITY}={low_priority}",
        f"{_DEALLOCATION}={option}",
    ]
    # Sorted by name: the documented results list $curTime, $isWeekday, $isWorkingWeekdayHour,
    # $workHours for a formula that assigns them in another order.
    parts.extend(f"{name}={_format_value(run.user_values[name])}" for name in sorted(run.user_values))
    return AutoScaleOutcome(
        target_dedicated_nodes=dedicated,
        target_low_priority_nodes=low_priority,
        node_deallocation_option=option,
        results=";".join(parts),
    )
