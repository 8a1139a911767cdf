"""Batch job and task states as TorchX app and replica states. Pure: no I/O, no Airflow.

A job the provider submits ends with its last task (or with a terminate request), so:

- PENDING: no task has started (nodes are still coming up, or the tasks wait for a free one);
- RUNNING: a task has started and the job has not ended;
- SUCCEEDED: every task succeeded; FAILED: a task failed, or the job ended with tasks undone (its wall clock);
- CANCELLED: the job was terminated by ``torchx cancel`` (or a user, or a killed Airflow task).
"""

from __future__ import annotations

from torchx.specs import AppState

from airflow_provider_azbatch.watching.state import TaskCounts

# Terminate reasons that mean someone stopped the app: torchx cancel, Batch's default for a user's terminate
# request, and a killed Airflow task (runs/lifecycle.py).
CANCEL_REASON = "TorchXCancel"
CANCEL_REASONS = frozenset({CANCEL_REASON, "UserTerminate", "AirflowTaskKilled"})
ENDED_JOB_STATES = frozenset({"completed", "terminating"})


def app_state(job_state: str | None, terminate_reason: str | None, counts: TaskCounts) -> AppState:
    """The app's state from its job's state, terminate reason and task counts."""
    if job_state is None:
        return AppState.UNKNOWN
    if job_state == "deleting":
        return AppState.CANCELLED
    ended = job_state in ENDED_JOB_STATES
    all_done = counts.total > 0 and counts.completed == counts.total
    if not (ended or all_done):
        return AppState.RUNNING if counts.running or counts.completed else AppState.PENDING
    if terminate_reason in CANCEL_REASONS:
        return AppState.CANCELLED
    if counts.failed or not all_done or counts.succeeded < counts.total:
        return AppState.FAILED
    return AppState.SUCCEEDED


def replica_state(task_state: str | None, result: str | None, *, cancelled: bool) -> AppState:
    """One replica's state: its Batch task's (or subtask's) state and result."""
    if task_state in ("active", "preparing", None):
        return AppState.CANCELLED if cancelled else AppState.PENDING
    if task_state == "running":
        return AppState.RUNNING
    if result == "success":
        return AppState.SUCCEEDED
    return AppState.CANCELLED if cancelled else AppState.FAILED
