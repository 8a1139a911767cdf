"""Azure Batch autoscale formulas, evaluated the way the Batch service evaluates them.

The language is documented at https://learn.microsoft.com/azure/batch/batch-automatic-scaling. This
package implements the documented subset listed in :data:`SUPPORTED_SUMMARY`; everything else fails with
an :class:`AutoScaleFormulaError` that names the construct, so a formula is never half-understood. Where
the documentation is silent the choice made is stated next to the code.

``lexer`` (tokens) → ``parser`` (statements of ``syntax`` nodes) → ``evaluator`` (a run against the
pool's ``samples`` and current values), with the ``operators``, ``functions`` and ``values`` of the
language and its ``vocabulary``.
"""

from .errors import (
    EVALUATION_ERROR,
    FORMULA_TOO_LONG,
    INSUFFICIENT_SAMPLE_DATA,
    NOT_SUPPORTED,
    SYNTAX_ERROR,
    AutoScaleFormulaError,
)
from .evaluator import AutoScaleOutcome, evaluate_formula, validate_formula
from .samples import Sample, SampleHistory
from .vocabulary import MAX_FORMULA_LENGTH, MAX_STATEMENTS, SAMPLED_VARIABLES, SUPPORTED_SUMMARY

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
