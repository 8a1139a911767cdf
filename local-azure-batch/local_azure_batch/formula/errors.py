"""How a formula fails: the service's error codes and messages, and the position of the problem.

Errors carry the service's ``code`` / ``message`` / ``values`` triple, with the detail in a single
``Message`` value prefixed by ``Line L, Col C:`` (1-based), as in the service's own example::

    {"code": "InsufficientSampleData",
     "message": "Autoscale evaluation failed due to insufficient sample data",
     "values": [{"name": "Message", "value": "Line 15, Col 44: Insufficient data from data set:
                                              $RunningTasks wanted 70%, received 50%"}]}
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# Documented by the service (REST error table and the pool autoscale event example).
SYNTAX_ERROR = "AutoScalingFormulaSyntaxError"
INSUFFICIENT_SAMPLE_DATA = "InsufficientSampleData"
# The Batch SDKs' error-code constants spell it this way (the REST table says AutoScalingFormulaTooLong).
FORMULA_TOO_LONG = "AutoScaleFormulaTooLong"
# A guess: the service's code for other evaluation failures is not documented.
EVALUATION_ERROR = "AutoScaleFormulaEvaluationError"
# Ours: the real service would evaluate these; the local one cannot.
NOT_SUPPORTED = "AutoScaleFormulaNotSupportedLocally"

MESSAGES = {
    SYNTAX_ERROR: "The specified auto-scaling formula has a syntax error.",
    FORMULA_TOO_LONG: "The specified auto-scaling formula exceeds lengths limit.",
    INSUFFICIENT_SAMPLE_DATA: "Autoscale evaluation failed due to insufficient sample data",
    EVALUATION_ERROR: "Autoscale evaluation failed due to an error in the formula",
    NOT_SUPPORTED: "The autoscale formula uses a feature that the local Batch service does not support",
}


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


class Failure(Exception):
    """Raised while parsing or evaluating; carries the position so the driver can add Line/Col."""

    def __init__(self, code: str, pos: int | None, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.pos = pos
        self.detail = detail


class Stop(Exception):
    """stop() was called."""


def line_col(text: str, pos: int) -> tuple[int, int]:
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return line, col


def to_error(formula: str, failure: Failure) -> AutoScaleFormulaError:
    detail = failure.detail
    if failure.pos is not None:
        line, col = line_col(formula, failure.pos)
        detail = f"Line {line}, Col {col}: {detail}"
    return AutoScaleFormulaError(failure.code, MESSAGES[failure.code], [("Message", detail)])
