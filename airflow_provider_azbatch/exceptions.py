"""Errors the provider raises, each saying what went wrong and what to do about it."""

from __future__ import annotations

from airflow_provider_azbatch.compat import AirflowException, AirflowFailException


class AzureBatchValidationError(AirflowFailException, ValueError):
    """A parameter (or task field, or connection field) breaks a rule; nothing was submitted.

    ``field`` names it as the user wrote it (``tasks[2].depends_on``, ``poll_interval``). Failing the task
    without retries: the same input would fail the same way again.
    """

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field} {problem}")
        self.field = field
        self.problem = problem


class BatchRequestRefusedError(AirflowFailException):
    """Batch refused a submission request as invalid (400): nothing was created, and a retry would be refused again."""


class SubmissionStepError(AirflowException):
    """A submission request kept failing (network, 5xx, throttling) beyond its retry budget."""


class QuotaReachedError(AirflowException):
    """The Batch account is at one of its quotas (active jobs, pools, cores)."""

    def __init__(self, code: str, limits: str, account: str, detail: str) -> None:
        super().__init__(f"Batch account '{account}' is at its quota of {limits} ({code}: {detail})")
        self.code = code
        self.limits = limits
        self.account = account
