"""How a Batch job ended (or why it has not yet), and how each of its tasks ended: the one verdict that the run's
report, ``jobs list``, job events and TorchX put into their own words. Pure: no I/O, no Airflow, no TorchX.

A job's verdict answers two questions apart, because its readers weigh them differently (``jobs list`` names a
failed task before a cancel, TorchX a cancel before a failed task):

- how its tasks ended (:func:`tasks_ended`, one of :data:`TASKS_ENDED`);
- why the job ended (:func:`ended_by`, one of :data:`ENDED_BY`), from its state and Batch's terminate reason.

:func:`job_verdict` answers both and joins them into one word (one of :data:`JOB_OUTCOMES`). The words are
explained in docs/explanation/failure-semantics.md ("How a job ended").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

# -- job states (the wire values) ------------------------------------------------------------------------------
# The job has ended (terminate requested, or done): nothing of it starts any more.
ENDED_STATES = ("completed", "terminating", "deleting")
# The job has ended and its release tasks ran (``terminating``: they may still run).
RELEASED_STATES = ("completed", "deleting")
DELETING = "deleting"
DISABLED_STATES = ("disabling", "disabled")

# -- terminate reasons -------------------------------------------------------------------------------------------
# Batch's own: every task ended (onAllTasksComplete), a task's exit options ended the job, the job's wall clock,
# and its default for a terminate request that names no reason.
ALL_TASKS_COMPLETE = "AllTasksComplete"
TASK_FAILED = "TaskFailed"
MAX_WALL_CLOCK = "MaxWallClockTimeExpiry"
USER_TERMINATE = "UserTerminate"
# The provider's: the Airflow task was killed, ran past execution_timeout, or lost its deferral; the pool could
# not run the job, or a Spot job could not move to dedicated nodes; nothing more could run (tasks wait on failed
# ones, or the job preparation task failed on every node).
AIRFLOW_TASK_KILLED = "AirflowTaskKilled"
AIRFLOW_EXECUTION_TIMEOUT = "AirflowExecutionTimeout"
AIRFLOW_DEFERRAL_ENDED = "AirflowDeferralEnded"
POOL_PROBLEM = "PoolProblem"
SPOT_FALLBACK_FAILED = "SpotFallbackFailed"
BLOCKED_BY_DEPENDENCIES = "TasksBlockedByFailures"
BLOCKED_BY_PREPARATION = "JobPreparationFailed"
BLOCKED_REASONS = {"dependencies": BLOCKED_BY_DEPENDENCIES, "preparation": BLOCKED_BY_PREPARATION}
# TorchX's: ``torchx cancel``, and a replica that failed (``TorchXReplicaFailed:<role>/<replica>:<exit code>``).
TORCHX_CANCEL = "TorchXCancel"
TORCHX_REPLICA_FAILED = "TorchXReplicaFailed"

# Someone stopped the job on purpose: a user (or the Batch API), a killed Airflow task, torchx cancel.
CANCEL_REASONS = frozenset({USER_TERMINATE, AIRFLOW_TASK_KILLED, TORCHX_CANCEL})
TIMEOUT_REASONS = frozenset({MAX_WALL_CLOCK, AIRFLOW_EXECUTION_TIMEOUT})

# A task ended by a terminate request (its own, or its job's) did not fail by itself: its failure code.
TASK_ENDED = "TaskEnded"

# -- the words ----------------------------------------------------------------------------------------------------
JOB_OUTCOMES = ("succeeded", "failed", "cancelled", "timed_out", "running", "waiting", "blocked", "unknown")
TASKS_ENDED = ("succeeded", "failed", "unfinished", "none")
ENDED_BY = ("tasks", "cancelled", "timed_out", "task_failed", "blocked", "terminated", "deleted")
# A task's: these, or the state of a task that has not finished.
TASK_OUTCOMES = ("succeeded", "accepted", "failed", "ended", "blocked")


class Counts(Protocol):
    """A job's task counts, as Batch gives them (``completed`` = ``succeeded`` + ``failed``)."""

    @property
    def active(self) -> int: ...
    @property
    def running(self) -> int: ...
    @property
    def completed(self) -> int: ...
    @property
    def succeeded(self) -> int: ...
    @property
    def failed(self) -> int: ...


def tasks_done(counts: Counts, expected: int = 1) -> bool:
    """Every task finished: none waits or runs, and at least ``expected`` completed (a job with no tasks yet, or
    fewer than its submission adds, is not done)."""
    return not counts.active and not counts.running and counts.completed >= expected


def tasks_ended(counts: Counts) -> str:
    """``none``: no tasks; ``failed``: a task completed without succeeding; ``unfinished``: none failed, some
    wait or run; ``succeeded``: every task succeeded."""
    if counts.active + counts.running + counts.completed == 0:
        return "none"
    if counts.failed or counts.completed > counts.succeeded:
        return "failed"
    if counts.active or counts.running:
        return "unfinished"
    return "succeeded"


def ended_by(reason: str | None) -> str:
    """Why a job ended, from its terminate reason (one of :data:`ENDED_BY` but ``deleted``)."""
    if not reason or reason == ALL_TASKS_COMPLETE:
        return "tasks"
    if reason in CANCEL_REASONS:
        return "cancelled"
    if reason in TIMEOUT_REASONS:
        return "timed_out"
    if reason == TASK_FAILED or reason.startswith(TORCHX_REPLICA_FAILED):
        return "task_failed"
    if reason in BLOCKED_REASONS.values():
        return "blocked"
    return "terminated"


@dataclass(frozen=True)
class Verdict:
    """How a job ended, or why it has not yet.

    ``outcome``: one of :data:`JOB_OUTCOMES`; ``tasks``: how its tasks ended (:data:`TASKS_ENDED`); ``ended_by``:
    why it ended (:data:`ENDED_BY`), None while it runs; ``started``: a task runs or ran; ``reason``: Batch's
    terminate reason, as given."""

    outcome: str
    tasks: str
    ended_by: str | None
    started: bool
    reason: str | None = None

    @property
    def over(self) -> bool:
        return self.ended_by is not None


def job_verdict(state: str | None, reason: str | None, counts: Counts, *, scheduling_error: bool = False) -> Verdict:
    """The verdict on a job from its state, terminate reason and task counts (``state`` None: not known).

    A job is over when it ended (:data:`ENDED_STATES`) or every task did. While it is not: ``running`` (a task
    runs), ``blocked`` (nothing runs and nothing can: tasks wait on failed ones, or ``scheduling_error``: the job
    cannot be scheduled, a missing pool), else ``waiting``. Once it is: ``cancelled`` (stopped on purpose, or
    deleted while it ran), ``succeeded`` (every task did), ``timed_out`` (a clock ended it with tasks undone),
    else ``failed``."""
    tasks = tasks_ended(counts)
    started = bool(counts.running or counts.completed)
    if state is None:
        return Verdict("unknown", tasks, None, started, reason)
    if state not in ENDED_STATES:
        if counts.running:
            return Verdict("running", tasks, None, started, reason)
        if scheduling_error or (counts.failed and counts.active):
            return Verdict("blocked", tasks, None, started, reason)
        if not tasks_done(counts):
            return Verdict("waiting", tasks, None, started, reason)
    # A job being deleted reads as what it ended as; deleted while it ran, the deletion stopped it.
    deleted = state == DELETING and reason is None and not tasks_done(counts)
    why = "deleted" if deleted else ended_by(reason)
    return Verdict(_outcome_of_over(why, tasks), tasks, why, started, reason)


def _outcome_of_over(why: str, tasks: str) -> str:
    if why in ("cancelled", "deleted"):
        return "cancelled"
    if tasks == "succeeded":
        return "succeeded"
    if tasks == "unfinished" and why == "timed_out":
        return "timed_out"
    return "failed"


# -- a task -------------------------------------------------------------------------------------------------------
def task_succeeded(state: str | None, result: str | None) -> bool:
    return state == "completed" and result == "success"


def task_ended(state: str | None, result: str | None, failure_code: str | None) -> bool:
    """Ended by a terminate request (its job's, or its own) rather than failing by itself."""
    return state == "completed" and result == "failure" and failure_code == TASK_ENDED


def task_outcome(
    state: str, result: str | None, failure_code: str | None, *, accepted: bool = False, blocked: bool = False
) -> str:
    """One of :data:`TASK_OUTCOMES`, or the state of an unfinished task. ``accepted``: it failed with an exit code
    its exit conditions map to ``dependencyAction: satisfy`` (the run counts it as a success); ``blocked``: it can
    never run (the watch found it waiting on failures, and the job was ended)."""
    if state != "completed":
        return "blocked" if blocked else state
    if task_succeeded(state, result):
        return "succeeded"
    if task_ended(state, result, failure_code):
        return "ended"
    return "accepted" if accepted else "failed"
