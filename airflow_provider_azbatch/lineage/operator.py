"""What lineage reads of an operator and of a run that ended.

The operator is ``AzureBatchJobOperator`` (or a subclass: TaskFlow's, TorchX's) and the run a
``runs.results.RunResult``; both live above lineage (it imports neither), so lineage says here what it reads of
them, and mypy checks the operator and the run against it where they hand themselves over.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from airflow_provider_azbatch.compat import Log
    from airflow_provider_azbatch.hooks.batch import AzureBatchHook
    from airflow_provider_azbatch.submission.request import JobRequest


class EndedRun(Protocol):
    """A run that ended: its job, what its XCom holds, and what it used and staged."""

    @property
    def job_id(self) -> str: ...
    @property
    def xcom(self) -> dict[str, Any]: ...
    @property
    def total(self) -> int: ...
    @property
    def nodes(self) -> int: ...
    @property
    def started_at(self) -> datetime | None: ...
    @property
    def staged_blobs(self) -> tuple[tuple[str, str], ...]: ...


class LineageOperator(Protocol):
    """A Batch job operator, as lineage reads it (besides ``lineage_result``, ``lineage_failure`` and a TaskFlow
    operator's ``get_python_source``, which it looks up only where they are)."""

    @property
    def task_id(self) -> str: ...
    @property
    def job_id(self) -> str | None: ...
    @property
    def pool_id(self) -> str | None: ...
    @property
    def hook(self) -> AzureBatchHook: ...
    @property
    def outlets(self) -> list[Any]: ...
    @property
    def log(self) -> Log: ...

    def job_request(self, *, running: bool = False) -> JobRequest: ...

    # The operator takes its own run (a RunResult); an EndedRun here would ask it to take any.
    def asset_results(self, result: Any) -> dict[str, Any] | None: ...
