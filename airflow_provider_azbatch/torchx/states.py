"""Batch job and task states as TorchX app and replica states. Pure: no I/O, no Airflow.

A job the provider submits ends with its last task (or with a terminate request), so:

- PENDING: no task has started (nodes are still coming up, or the tasks wait for a free one);
- RUNNING: a task has started and the job has not ended;
- SUCCEEDED: every task succeeded; FAILED: a task failed, or the job ended with tasks undone (its wall clock);
- CANCELLED: the job was terminated by ``torchx cancel`` (or a user, or a killed Airflow task), or deleted while it
  ran (a job being deleted after it ended reads as what it ended as).

A replica's own record (:mod:`.records`) says how it ended; a replica that failed fails the app, even while the
job still runs (``describe`` then ends it: fail fast).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from torchx.specs import AppState

from airflow_provider_azbatch.model.records import TaskCounts
from airflow_provider_azbatch.model.verdict import (
    CANCEL_REASONS as CANCEL_REASONS,  # read here by torchx/replicas.py
)
from airflow_provider_azbatch.model.verdict import (
    ENDED_STATES,
    TASK_ENDED,
    TORCHX_CANCEL,
    TORCHX_REPLICA_FAILED,
    job_verdict,
)
from airflow_provider_azbatch.torchx.records import Record

# The terminate reasons TorchX gives: torchx cancel, and describe's when it ends an app for a failed replica
# (FAIL_FAST_REASON:<role index>/<replica>:<exit code>). Which reasons mean someone stopped the app
# (CANCEL_REASONS), and which job states have ended, are the verdict's.
CANCEL_REASON = TORCHX_CANCEL
FAIL_FAST_REASON = TORCHX_REPLICA_FAILED
ENDED_JOB_STATES = ENDED_STATES

# The verdicts of an app that is over, as TorchX states; one that is not is RUNNING once a task has started.
_OVER = {
    "succeeded": AppState.SUCCEEDED,
    "failed": AppState.FAILED,
    "timed_out": AppState.FAILED,
    "cancelled": AppState.CANCELLED,
    "unknown": AppState.UNKNOWN,
}


def app_state(job_state: str | None, terminate_reason: str | None, counts: TaskCounts) -> AppState:
    """The app's state from its job's state, terminate reason and task counts: the verdict on the job
    (:func:`~airflow_provider_azbatch.model.verdict.job_verdict`) as a TorchX state."""
    verdict = job_verdict(job_state, terminate_reason, counts)
    if verdict.outcome in _OVER:
        return _OVER[verdict.outcome]
    return AppState.RUNNING if verdict.started else AppState.PENDING


@dataclass(frozen=True)
class Carrier:
    """What Batch knows of the task (replica 0) or subtask (another replica) a replica runs in."""

    state: str | None = None
    result: str | None = None
    exit_code: int | None = None
    failure_code: str | None = None


def replica_state(index: int, carrier: Carrier, record: Record | None, *, job_ended: bool, cancelled: bool) -> AppState:
    """One replica's state: its own record (how it ended, when it did), else what Batch knows.

    A replica still running when its task ended was stopped (CANCELLED): by ``torchx cancel``, by another's
    failure (fail fast), or, on a node other than the primary, by replica 0's end (Batch ends a multi-instance
    task's other nodes with it)."""
    if record is not None and record.ended_itself:
        return AppState.SUCCEEDED if record.state == "succeeded" else AppState.FAILED
    ended = carrier.state == "completed" or job_ended
    if not ended:
        if carrier.state == "running":
            return AppState.RUNNING
        return AppState.PENDING
    if cancelled or carrier.failure_code == TASK_ENDED or (record is not None and record.state == "running"):
        if index == 0 and carrier.result == "success":
            return AppState.SUCCEEDED
        return AppState.CANCELLED
    if carrier.state != "completed":
        return AppState.CANCELLED  # never ran: its job ended first
    if carrier.result == "failure":
        return AppState.FAILED  # Batch's own failure (a coordination command, an image pull) or replica 0's exit
    # Replica 0 is its task (its exit code is Batch's); another replica without a record of its own is unknown.
    return AppState.SUCCEEDED if index == 0 else AppState.UNKNOWN


def with_replicas(state: AppState, replicas: Iterable[AppState]) -> AppState:
    """The app's state, given its replicas': any replica that failed fails the app (unless it was cancelled)."""
    if state in (AppState.CANCELLED, AppState.FAILED):
        return state
    return AppState.FAILED if AppState.FAILED in replicas else state
