"""Whether a cancelled trigger's job was killed with its task, or only moves on. No I/O.

A triggerer cancels a trigger when a user killed its task (marked it failed or success, cleared it), but also when
it stops (a restart, a graceful shutdown), when it hands the trigger to another triggerer (its heartbeat lapsed)
and when Airflow's own timeout of the deferral passed. Only the first must end the Batch job. Airflow 3.3 says so
with ``on_kill`` (and calls it on a handover too); 3.0-3.2 only cancel. So the trigger asks, every line alike,
what became of its task instance, and this module decides from the answer (one decision for ``on_kill`` and for
a cancellation):

- the task instance is still deferred in the trigger's own try: it moved (or its triggerer stops): the job goes on;
- it is no longer deferred (failed, success, cleared: no state, queued for a new try...): a kill, terminate;
- a newer try of it claimed a job (the operator records each try's job in XCom ``azbatch_job`` before it
  defers): a kill of this try; the job goes on only if that newer try watches the very same job (it reattached
  to it), which also keeps a cleared task that deferred again before this trigger was cancelled from losing it;
- Airflow's deferral timeout passed: the task resumes to end the job itself, with its own reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

DEFERRED = "deferred"


@dataclass(frozen=True)
class KillFacts:
    """What the triggerer told the cancelled trigger.

    :param task_state: the task instance's state now (``"none"``: it has none, it was cleared).
    :param claim: the XCom ``azbatch_job`` of the task instance (``job_id`` and ``try_number`` of the try that
        last submitted or reattached); None when there is none (a new try started and cleared it).
    :param timed_out: Airflow's timeout of the deferral has passed.
    """

    task_state: str
    claim: dict[str, Any] | None = None
    timed_out: bool = False


@dataclass(frozen=True)
class Verdict:
    terminate: bool
    why: str


def claimed_try(claim: dict[str, Any] | None) -> int | None:
    value = claim.get("try_number") if isinstance(claim, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def decide(job_id: str, try_number: int | None, facts: KillFacts) -> Verdict:
    """Terminate ``job_id`` (watched by try ``try_number`` of the task instance; None: unknown) or not."""
    if facts.timed_out:
        return Verdict(False, f"Batch job {job_id}: the deferral timed out; the task ends the job when it resumes")
    newer = claimed_try(facts.claim)
    if try_number is not None and newer is not None and newer > try_number:
        assert facts.claim is not None
        if facts.claim.get("job_id") == job_id:
            return Verdict(False, f"Batch job {job_id} goes on: try {newer} of the task watches it now")
        return Verdict(
            True, f"the task was cleared: try {try_number} is over, try {newer} runs job {facts.claim.get('job_id')}"
        )
    if facts.task_state == DEFERRED:
        return Verdict(
            False,
            f"Batch job {job_id} goes on: the task is still deferred "
            "(its trigger moves to another triggerer, or this triggerer stops)",
        )
    if facts.task_state == "none":
        return Verdict(True, "the task was cleared")
    if facts.task_state in ("failed", "success"):
        return Verdict(True, f"the task was marked {facts.task_state}")
    return Verdict(True, f"the task is {facts.task_state} now")
