"""How a Batch job turned out, from its state and task counts: what ``jobs list`` shows and filters on.

Batch reports a job whose task failed as ``completed`` (terminate reason ``AllTasksComplete`` or
``TaskFailed``), like a job whose tasks all succeeded. No documented ``$filter`` of List Jobs tells the two
apart, so the outcome is worked out from one task-count request per job, by the verdict (:mod:`.model.verdict`)
put in the words of ``jobs list``.
"""

from __future__ import annotations

from airflow_provider_azbatch.model.verdict import DELETING, DISABLED_STATES, TORCHX_CANCEL, Counts, job_verdict

# The outcomes, in the order a user asks about them.
OUTCOMES = ("succeeded", "failed", "cancelled", "running", "waiting", "blocked", "disabled", "deleting")


def job_outcome(state: str, counts: Counts, terminate_reason: str | None, scheduling_error: bool = False) -> str:
    """``counts``: the job's task counts (``active``, ``running``, ``succeeded``, ``failed``).

    - succeeded: every task succeeded (an ended job, or an active one whose tasks are all done);
    - failed: a task failed for good, or the job ended before its tasks did (wall clock, a timeout);
    - cancelled: the job was terminated on purpose before its tasks were done;
    - running: some task runs; waiting: tasks wait for a node; blocked: nothing runs and nothing can
      (tasks wait on failed tasks, or the job cannot be scheduled: a missing pool);
    - disabled, deleting: the job's state, whatever its tasks did.

    Unlike TorchX, ``jobs list`` names a failed task before a cancel, calls an ended job with no tasks
    succeeded, and has always read a job ``torchx cancel`` stopped with tasks undone as failed.
    """
    if state in DISABLED_STATES:
        return "disabled"
    if state == DELETING:
        return "deleting"
    verdict = job_verdict(state, terminate_reason, counts, scheduling_error=scheduling_error)
    if not verdict.over:
        return verdict.outcome
    if verdict.tasks == "unfinished":
        stopped = verdict.ended_by == "cancelled" and terminate_reason != TORCHX_CANCEL
        return "cancelled" if stopped else "failed"
    return "failed" if verdict.tasks == "failed" else "succeeded"
