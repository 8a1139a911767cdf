"""Whether a cancelled trigger's job was killed with its task, or only moves on. No I/O.

A triggerer cancels a trigger when a user killed its task (marked it failed or success, cleared it), but also when
it stops (a restart, a graceful shutdown), when it hands the trigger to another triggerer (its heartbeat lapsed)
and when Airflow's own timeout of the deferral passed. Only the first must end the Batch job. Airflow 3.3 says so
with ``on_kill`` (and calls it on a handover too); 3.0-3.2 only cancel. So the trigger asks, every line alike,
what became of its task instance, and this module decides from the answer (one decision for ``on_kill`` and for
a cancellation, :func:`decide`, without I/O) and terminates the job when it was killed (:func:`end_job_if_killed`):

- the task instance is still deferred in the trigger's own try: it moved (or its triggerer stops): the job goes on;
- it is no longer deferred (failed, success, cleared: no state, queued for a new try...): a kill, terminate;
- a newer try of it claimed a job (the operator records each try's job in XCom ``azbatch_job`` before it
  defers): a kill of this try; the job goes on only if that newer try watches the very same job (it reattached
  to it), which also keeps a cleared task that deferred again before this trigger was cancelled from losing it;
- Airflow's deferral timeout passed: the task resumes to end the job itself, with its own reason.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from airflow_provider_azbatch.compat import (
    TRIGGER_ON_KILL,
    aget_xcom_to_reply,
    atask_state,
    triggers_run_inline,
)
from airflow_provider_azbatch.hooks.batch_async import AzureBatchAsyncHook
from airflow_provider_azbatch.hooks.errors import describe_error
from airflow_provider_azbatch.links.job import LINK_XCOM_KEY
from airflow_provider_azbatch.model.records import TERMINAL_JOB_STATES
from airflow_provider_azbatch.triggers.checkpoints import answers, read_xcom

if TYPE_CHECKING:
    from airflow_provider_azbatch.triggers.checkpoints import Logger
    from airflow_provider_azbatch.triggers.job import AzureBatchJobTrigger

DEFERRED = "deferred"
# How long a cancelled trigger waits (before Airflow 3.3) for its check whether the task was killed; past it (or
# cancelled again) the check goes on in the background.
KILL_CHECK_SECONDS = 20.0

# Event loops (triggerer processes) whose triggers have asked about a task instance once (see warm_up).
_warmed_up: set[int] = set()
# Checks whether a cancelled trigger's task was killed, in flight (see end_job_if_killed).
_killing: set[asyncio.Future[None]] = set()


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


def trigger_timed_out(trigger: AzureBatchJobTrigger) -> bool:
    """Whether Airflow's own timeout of the deferral (``timeout`` of ``defer()``) has passed: every line sets
    ``timeout_after`` on the triggers it runs, and cancels a trigger past it."""
    timeout = getattr(trigger, "timeout_after", None)
    if not isinstance(timeout, datetime):
        return False
    if timeout.tzinfo is None:
        timeout = timeout.replace(tzinfo=timezone.utc)
    return timeout <= datetime.now(timezone.utc)


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


def warm_up(trigger: AzureBatchJobTrigger) -> None:
    """Ask the triggerer about this trigger's task instance once per triggerer process, in the background.

    A triggerer answers its first such question slowly (it builds its execution API then: 5-8 s, 30 s on a busy
    2-core machine), and a killed task's trigger asks one: asked at the first trigger's start, that cost is not paid
    at the first kill. Not before the trigger's first poll: on 3.2 the triggerer answers its requests in order, and
    the first poll's (the connection) would wait for that slow one. Not on 3.3+, where ``on_kill`` asks nothing.
    """
    if not trigger.terminate_on_kill or TRIGGER_ON_KILL or trigger._ti_coordinates() is None or triggers_run_inline():
        return
    loop_id = id(asyncio.get_running_loop())
    if loop_id in _warmed_up:
        return
    _warmed_up.add(loop_id)
    _in_background(_ask_once(trigger))


async def _ask_once(trigger: AzureBatchJobTrigger) -> None:
    try:
        await trigger._task_state()
    except Exception as exc:
        trigger.log.debug("The triggerer did not answer about the task instance (%s)", describe_error(exc))


def check_after_cancellation(trigger: AzureBatchJobTrigger) -> asyncio.Future[None] | None:
    """Before Airflow 3.3 (no ``on_kill``): a cancelled trigger finds out whether its task was killed, and
    terminates the job if so; the work runs on its own, started here."""
    if not trigger.terminate_on_kill or TRIGGER_ON_KILL or triggers_run_inline():
        return None
    return _in_background(_terminate_if_killed(trigger))


async def hold_for_the_check(
    killed: asyncio.Future[None], answered: bool | None, read: Callable[[], Awaitable[object]]
) -> None:
    """Hold a cancelled trigger until its kill check is done (the trigger's log then has the verdict), at most
    ``KILL_CHECK_SECONDS``; cancelled again meanwhile (about every second while it runs), the check goes on in the
    background. Not when the triggerer no longer answers (``answered``: its last checkpoint write; None: nothing
    was written, and ``read`` asks): it stops, and holding the trigger would only hold its exit, until its SIGKILL.
    """
    if answered is None:
        answered = await answers(read)
    if answered:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(killed), KILL_CHECK_SECONDS)


async def end_job_if_killed(trigger: AzureBatchJobTrigger) -> None:
    """Terminate the job if the task was killed, however often this is cancelled meanwhile.

    The triggerer repeats its cancellation about every second until the trigger is over, which would cancel
    this too: the work is shielded, and finishes even when this returns early.
    """
    await asyncio.shield(_in_background(_terminate_if_killed(trigger)))


def _in_background(work: Coroutine[Any, Any, None]) -> asyncio.Future[None]:
    future: asyncio.Future[None] = asyncio.ensure_future(work)
    _killing.add(future)  # the loop keeps only weak references to tasks
    future.add_done_callback(_killing.discard)
    return future


async def _terminate_if_killed(trigger: AzureBatchJobTrigger) -> None:
    job_id, log = trigger.job_id, trigger.log
    try:
        verdict = decide(job_id, trigger._try_number(), await _kill_facts(trigger))
    except Exception as exc:
        # Rather leave a job running than kill one that another trigger watches.
        log.warning(
            "Batch job %s was not terminated: the task instance's state could not be read (%s); "
            "terminate the job yourself if the task was killed",
            job_id,
            describe_error(exc),
        )
        return
    if not verdict.terminate:
        log.info("%s", verdict.why)
        return
    if await _terminate(trigger.azbatch_conn_id, job_id, log):
        log.info("Terminated Batch job %s (the Airflow task was killed: %s)", job_id, verdict.why)


async def _terminate(conn_id: str, job_id: str, log: Logger) -> bool:
    """Terminate the job unless it has ended already; whether this did."""
    hook = AzureBatchAsyncHook(conn_id)
    try:
        async with hook.connected():
            # A trigger that was moved may run on two triggerers a moment: both are told of the kill.
            status = await hook.get_job_status(job_id)
            if status is None or status.state in TERMINAL_JOB_STATES:
                log.info("Batch job %s has ended already (the Airflow task was killed)", job_id)
                return False
            await hook.terminate_job(job_id, "AirflowTaskKilled")
    except Exception as exc:
        log.warning("Could not terminate Batch job %s: %s", job_id, describe_error(exc))
        return False
    return True


async def _kill_facts(trigger: AzureBatchJobTrigger) -> KillFacts:
    """What became of the task instance (read in this order: a newer try records its job before it defers)."""
    if trigger_timed_out(trigger):
        return KillFacts(task_state="unknown", timed_out=True)
    task_state = await trigger._task_state()
    if task_state is None:  # no task instance: a trigger run on its own, whose caller cancelled it
        return KillFacts(task_state="none")
    return KillFacts(task_state=task_state, claim=await trigger._job_claim())


async def task_state(where: dict[str, Any] | None) -> str | None:
    """The task instance's state now, as the triggerer's execution API reads it (None: the trigger runs
    without a task instance, outside a triggerer)."""
    if where is None:
        return None
    return await atask_state(**where)


async def job_claim(where: dict[str, Any] | None, log: Logger) -> dict[str, Any] | None:
    """What the try that last submitted or reattached to a job for the task instance recorded (XCom
    ``azbatch_job``: its job and try number); None when there is none, or it cannot be read."""
    unread = "The task instance's job record was not read (%s): its state decides alone"
    claim = await read_xcom(aget_xcom_to_reply, LINK_XCOM_KEY, where, log, unread)
    return claim if isinstance(claim, dict) else None
