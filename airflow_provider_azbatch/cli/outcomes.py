"""How a Batch job turned out, from its state and task counts: what ``jobs list`` shows and filters on.

Batch reports a job whose task failed as ``completed`` (terminate reason ``AllTasksComplete`` or
``TaskFailed``), like a job whose tasks all succeeded. No documented ``$filter`` of List Jobs tells the two
apart, so the outcome is worked out here, from one task-count request per job.
"""

from __future__ import annotations

from typing import Any

# The outcomes, in the order a user asks about them.
OUTCOMES = ("succeeded", "failed", "cancelled", "running", "waiting", "blocked", "disabled", "deleting")
# Terminate reasons of a job stopped on purpose (by `jobs cancel` or the Batch API, or a killed Airflow task).
CANCEL_REASONS = ("UserTerminate", "AirflowTaskKilled")
ENDED_STATES = ("completed", "terminating")


def job_outcome(state: str, counts: Any, terminate_reason: str | None, scheduling_error: bool = False) -> str:
    """``counts``: the job's task counts (``active``, ``running``, ``succeeded``, ``failed``).

    - succeeded: every task succeeded (an ended job, or an active one whose tasks are all done);
    - failed: a task failed for good, or the job ended before its tasks did (wall clock, a timeout);
    - cancelled: the job was terminated on purpose before its tasks were done;
    - running: some task runs; waiting: tasks wait for a node; blocked: nothing runs and nothing can
      (tasks wait on failed tasks, or the job cannot be scheduled: a missing pool).
    """
    if state in ("disabling", "disabled"):
        return "disabled"
    if state == "deleting":
        return "deleting"
    unfinished = counts.active + counts.running
    if state in ENDED_STATES:
        if counts.failed:
            return "failed"
        if unfinished:
            return "cancelled" if terminate_reason in CANCEL_REASONS else "failed"
        return "succeeded"
    if counts.running:
        return "running"
    if scheduling_error or (counts.failed and counts.active):
        return "blocked"
    if counts.active or not counts.succeeded + counts.failed:
        return "waiting"
    return "failed" if counts.failed else "succeeded"
