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
from airflow_provider_azbatch.torchx.records import Record

# Terminate reasons that mean someone stopped the app: torchx cancel, Batch's default for a user's terminate
# request, and a killed Airflow task (runs/lifecycle.py).
CANCEL_REASON = "TorchXCancel"
CANCEL_REASONS = frozenset({CANCEL_REASON, "UserTerminate", "AirflowTaskKilled"})
# describe's terminate reason when it ends an app for a failed replica: FAIL_FAST_REASON:<role index>/<replica>:<exit>
FAIL_FAST_REASON = "TorchXReplicaFailed"
# A job being deleted has ended: it reads as what it ended as (SUCCEEDED, FAILED), CANCELLED only if the deletion
# stopped it while it ran.
DELETING = "deleting"
ENDED_JOB_STATES = frozenset({"completed", "terminating", DELETING})


def app_state(job_state: str | None, terminate_reason: str | None, counts: TaskCounts) -> AppState:
    """The app's state from its job's state, terminate reason and task counts."""
    if job_state is None:
        return AppState.UNKNOWN
    ended = job_state in ENDED_JOB_STATES
    all_done = counts.total > 0 and counts.completed == counts.total
    if not (ended or all_done):
        return AppState.RUNNING if counts.running or counts.completed else AppState.PENDING
    if terminate_reason in CANCEL_REASONS:
        return AppState.CANCELLED
    if job_state == DELETING and terminate_reason is None and not all_done:
        return AppState.CANCELLED  # deleted while it ran: the deletion stopped it
    if counts.failed or not all_done or counts.succeeded < counts.total:
        return AppState.FAILED
    return AppState.SUCCEEDED


@dataclass(frozen=True)
class Carrier:
    """What Batch knows of the task (replica 0) or subtask (another replica) a replica runs in."""

    state: str | None = None
    result: str | None = None
    exit_code: int | None = None
    failure_code: str | None = None


# A task or subtask ended by its job's end or a terminate request, not by its own command.
ENDED_BY_REQUEST = "TaskEnded"


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
    if cancelled or carrier.failure_code == ENDED_BY_REQUEST or (record is not None and record.state == "running"):
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
