"""How a completed job ended, from its tasks, and the event a watcher fires for it (no Airflow, no I/O)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow_provider_azbatch.job_events.filters import metadata_of, pool_of
from airflow_provider_azbatch.model.outcomes import MAX_EXIT_CODES, TaskEnd, counts_of
from airflow_provider_azbatch.model.records import JobChange
from airflow_provider_azbatch.model.verdict import tasks_ended


def outcome_of(tasks: Sequence[TaskEnd]) -> str:
    """ "succeeded" when the job had tasks and every one of them succeeded (as an Airflow run of the job would
    succeed), else "failed" (a task failed, never ran, or the job was ended before it had any): the verdict on
    its tasks alone, whatever ended the job."""
    return "succeeded" if tasks_ended(counts_of(tasks)) == "succeeded" else "failed"


def job_event(change: JobChange, tasks: Sequence[TaskEnd], *, conn_id: str, account: str | None) -> dict[str, Any]:
    """The payload of the event fired for a completed job (docs/reference/lineage.md#batch-job-events)."""
    execution = change.fields.get("executionInfo") or {}
    ordered = sorted(tasks, key=lambda task: (task.succeeded, task.id))  # failed tasks first
    codes = {task.id: task.exit_code for task in ordered[:MAX_EXIT_CODES]}
    payload: dict[str, Any] = {
        "job_id": change.id,
        "outcome": outcome_of(tasks),
        "completed_at": change.at,
        "pool_id": pool_of(change.fields),
        "terminate_reason": execution.get("terminateReason") if isinstance(execution, Mapping) else None,
        "exit_codes": codes,
        "tasks": {
            "succeeded": sum(1 for task in tasks if task.succeeded),
            "failed": sum(1 for task in tasks if not task.succeeded),
        },
        "metadata": metadata_of(change.fields),
        "batch_account": account,
        "conn_id": conn_id,
    }
    if len(tasks) > MAX_EXIT_CODES:
        payload["exit_codes_truncated"] = True
    return payload
