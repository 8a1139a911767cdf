"""A trigger handed to another triggerer (its own triggerer's heartbeat lapsed): Airflow 3.3 calls its on_kill
as for a user's kill (3.0-3.2 only cancel it: tests/provider/test_trigger_kill.py), and a trigger back from a stall
meets a checkpoint the other one wrote. Against the local Batch service; the triggerer's answers (the task
instance's state, its job record, the stored checkpoint) are given by the test."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from airflow.triggers.base import TriggerEvent
from azure.batch import models as m

from airflow_provider_azbatch.hooks.batch import AzureBatchHook
from airflow_provider_azbatch.specs.tasks import TaskSpec
from airflow_provider_azbatch.submission.job import JobSubmission
from airflow_provider_azbatch.submission.reattach import submit
from airflow_provider_azbatch.triggers import handover, watch_events
from airflow_provider_azbatch.triggers.job import AzureBatchJobTrigger
from airflow_provider_azbatch.watching.state import WatchState
from tests.airflow_helpers import captured_logs, messages
from tests.helpers import sh, wait_until


def _running_job(pool: str, command: str = "sleep 60") -> str:
    hook = AzureBatchHook()
    job_id = f"handover-{uuid.uuid4().hex[:8]}"
    submit(hook, JobSubmission(job_id=job_id, pool_id=pool, tasks=[TaskSpec(id="t", command_line=command)]))
    wait_until(lambda: hook.get_task_counts(job_id).running == 1, what="the task running")
    return job_id


class TaskInState(AzureBatchJobTrigger):
    """The trigger as a triggerer runs it, the task instance being in ``task_state`` (its job record: none)."""

    task_state = "deferred"

    async def _task_state(self) -> str | None:
        return self.task_state

    async def _job_claim(self) -> dict | None:
        return None


def test_on_kill_leaves_the_job_of_a_task_still_deferred(azbatch_default, shared_pool, batch_client):
    job_id = _running_job(shared_pool)
    trigger = TaskInState("azbatch_default", WatchState(job_id=job_id).to_json(), terminate_on_kill=True)
    with captured_logs() as logs:
        asyncio.run(trigger.on_kill())
    assert batch_client.get_job(job_id).state == m.BatchJobState.ACTIVE
    assert (
        f"Batch job {job_id} goes on: the task is still deferred "
        "(its trigger moves to another triggerer, or this triggerer stops)" in messages(logs)
    )

    # Marked failed (or success, or cleared): the job is terminated.
    TaskInState.task_state = "failed"
    asyncio.run(trigger.on_kill())
    job = wait_until(lambda: (j := batch_client.get_job(job_id)).state == m.BatchJobState.COMPLETED and j)
    assert job.execution_info.termination_reason == "AirflowTaskKilled"


def test_on_kill_of_a_job_ended_already_sends_no_terminate(
    azbatch_default, local_batch_service, shared_pool, batch_client
):
    # Two triggerers ran the trigger a moment (it was moved): both are told of the kill; one terminates.
    job_id = _running_job(shared_pool)
    TaskInState.task_state = "failed"
    first, second = (
        TaskInState("azbatch_default", WatchState(job_id=job_id).to_json(), terminate_on_kill=True) for _ in range(2)
    )
    asyncio.run(first.on_kill())
    with captured_logs() as logs:
        asyncio.run(second.on_kill())
    terminates = local_batch_service.request_log(jobs=[job_id], operations=["Jobs_TerminateJob"])
    assert [request["status"] for request in terminates] == [202]
    assert f"Batch job {job_id} has ended already (the Airflow task was killed)" in messages(logs)


class StateUnreadable(AzureBatchJobTrigger):
    async def _task_state(self) -> str | None:
        raise ConnectionResetError("Supervisor closed")


def test_on_kill_leaves_the_job_when_the_task_state_cannot_be_read(azbatch_default, shared_pool, batch_client):
    job_id = _running_job(shared_pool)
    trigger = StateUnreadable("azbatch_default", WatchState(job_id=job_id).to_json(), terminate_on_kill=True)
    with captured_logs() as logs:
        asyncio.run(trigger.on_kill())
    assert batch_client.get_job(job_id).state == m.BatchJobState.ACTIVE
    assert any(
        line.startswith(f"Batch job {job_id} was not terminated: the task instance's state could not be read")
        for line in messages(logs)
    )
    AzureBatchHook().terminate_job(job_id)


@pytest.mark.serial
def test_on_kill_finishes_though_the_triggerer_cancels_it_again(azbatch_default, shared_pool, batch_client):
    # The triggerer cancels a trigger it drops about every second until it is over, on_kill included.
    job_id = _running_job(shared_pool)
    TaskInState.task_state = "failed"
    trigger = TaskInState("azbatch_default", WatchState(job_id=job_id).to_json(), terminate_on_kill=True)

    async def killed_twice() -> str:
        kill = asyncio.ensure_future(trigger.on_kill())
        await asyncio.sleep(0)
        kill.cancel()
        with pytest.raises(asyncio.CancelledError):
            await kill
        deadline = time.monotonic() + 30
        while (job := await asyncio.to_thread(batch_client.get_job, job_id)).state != m.BatchJobState.COMPLETED:
            assert time.monotonic() < deadline, "the job was not terminated"
            await asyncio.sleep(0.2)
        return job.execution_info.termination_reason

    assert asyncio.run(killed_twice()) == "AirflowTaskKilled"


LINE_BYTES = len("line 000\n")


class StallsOnce(AzureBatchJobTrigger):
    """Its event loop stalls once; meanwhile another trigger shows ``skipped`` more lines and checkpoints them."""

    skipped = 5
    stalled = False
    caught_up_after: int | None = None  # the last line this trigger had shown when it read the checkpoint
    theirs_offset: int | None = None  # where the other trigger's checkpoint is
    stood_by: tuple[float, float] | None = None

    async def _read_checkpoint(self):
        if not self.stalled:  # at the start: no checkpoint yet
            return None
        assert self._state is not None
        theirs = self._state.to_json()
        cursor = theirs["cursors"]["t/stdout.txt"]
        # The other trigger checkpointed once, `skipped` lines further, then stopped: a later read (a busy machine
        # may stall this trigger again) finds that same checkpoint, not one further still.
        if self.theirs_offset is None:
            self.caught_up_after = cursor["offset"] // LINE_BYTES
            self.theirs_offset = cursor["offset"] + self.skipped * LINE_BYTES
        cursor["offset"] = max(cursor["offset"], self.theirs_offset)
        return theirs

    async def _stand_by(self, theirs, late):
        began = time.time()
        try:
            return await super()._stand_by(theirs, late)
        finally:
            self.stood_by = (began, time.time())

    async def _watch(self, watcher, hook, checkpoints, stall):
        async def stall_once() -> None:
            while not watcher.state.cursors.get("t/stdout.txt", {}).get("offset"):
                await asyncio.sleep(0.05)
            self.stalled = True
            time.sleep(1.5)  # the whole process stops (frozen, or starved)

        staller = asyncio.ensure_future(stall_once())
        try:
            return await super()._watch(watcher, hook, checkpoints, stall)
        finally:
            staller.cancel()


def _stalls_once(monkeypatch, pool: str) -> tuple[str, StallsOnce]:
    # A stall of half the health-check threshold (0.5 s here) may have let another triggerer take over.
    monkeypatch.setenv("AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD", "1")
    monkeypatch.setattr(handover, "STALL_SETTLE_SECONDS", 0.3)
    monkeypatch.setattr(handover, "STAND_BY_FRACTION", 2.0)
    job_id = _running_job(pool, sh("for n in $(seq 1 40); do printf 'line %03d\\n' $n; sleep 0.15; done"))
    state = WatchState(job_id=job_id, expected_tasks=1, streamed=["t"])
    return job_id, StallsOnce("azbatch_default", state.to_json(), poll_interval=0.2)


@pytest.mark.serial
def test_a_trigger_back_from_a_stall_stands_by_then_continues_from_a_further_checkpoint(
    azbatch_default, local_batch_service, shared_pool, monkeypatch
):
    # Another trigger checkpointed further while this one stalled: the job was handed over. This one polls and
    # shows nothing while Airflow has not cancelled it; not cancelled (the job came back), it goes on from there.
    job_id, trigger = _stalls_once(monkeypatch, shared_pool)

    async def watch():
        return await asyncio.wait_for(anext(trigger.run()), 60)

    with captured_logs() as logs:
        event = asyncio.run(watch())
    assert event.payload["status"] == "done"
    # The last poll's lines travel in the event, for the task to show.
    logged = [line for line in messages(logs) if line.startswith("[t] line ")]
    carried = [line for task, line in event.payload.get("lines", []) if task == "t"]
    shown = [int(line.split()[-1]) for line in logged + carried]
    after = trigger.caught_up_after
    assert after is not None
    assert after < 40 - StallsOnce.skipped
    # What the other trigger showed is not shown again; nothing else is left out, nothing is shown twice.
    assert event.payload["watch_state"]["cursors"]["t/stdout.txt"]["offset"] == 40 * LINE_BYTES
    assert shown == [n for n in range(1, 41) if not after < n <= after + StallsOnce.skipped]
    said = messages(logs)
    assert any(
        line.startswith("This triggerer stalled for ")
        and line.endswith(
            f"another one showed Batch job {job_id} output meanwhile: standing by until Airflow cancels this "
            "trigger (at most 2 s)"
        )
        for line in said
    ), said
    assert (
        f"Batch job {job_id}: this trigger was not cancelled within 2 s (the job is this triggerer's again): "
        "continuing from the latest checkpoint"
    ) in said
    # Standing by, it asked the service nothing.
    assert trigger.stood_by is not None
    began, ended = trigger.stood_by
    assert ended - began >= 2
    asked = [r for r in local_batch_service.request_log(jobs=[job_id]) if began + 0.05 < r["at"] < ended - 0.05]
    assert asked == []


class RecordsCheckpoints(StallsOnce):
    """Keeps the checkpoints it writes, and tells when it stands by."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.written: list[dict] = []
        self.standing_by = asyncio.Event()

    async def _write_checkpoint(self, state):
        self.written.append(state)

    async def _stand_by(self, theirs, late):
        self.standing_by.set()
        return await super()._stand_by(theirs, late)


def test_a_trigger_cancelled_while_it_stands_by_writes_no_checkpoint(azbatch_default, shared_pool, monkeypatch):
    # Airflow cancels the trigger it handed over. What this one showed before its stall is behind the other's
    # checkpoint: writing it (as a cancelled trigger writes its last state) would take that back.
    job_id, stalls = _stalls_once(monkeypatch, shared_pool)
    trigger = RecordsCheckpoints("azbatch_default", stalls.watch_state, poll_interval=0.2)

    async def cancelled_standing_by() -> int:
        run = asyncio.ensure_future(anext(trigger.run()))
        await asyncio.wait_for(trigger.standing_by.wait(), 30)
        written = len(trigger.written)
        await asyncio.sleep(0.5)  # of the 2 s it stands by
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        return written

    with captured_logs() as logs:
        written = asyncio.run(cancelled_standing_by())
    assert trigger.written[written:] == []
    said = messages(logs)
    stood = next(i for i, line in enumerate(said) if line.startswith("This triggerer stalled for "))
    assert [line for line in said[stood:] if line.startswith("[t] line ")] == []
    AzureBatchHook().terminate_job(job_id)


class SpansAStall(AzureBatchJobTrigger):
    """One of its polls takes longer than a stall (the service is slow to answer, as for a triggerer frozen while
    the poll was in flight); meanwhile another trigger took the job over from what this one had shown, and showed
    all that this one's poll read and ``skipped`` more lines."""

    skipped = 5
    reads = 0
    shown_before: int | None = None  # the last line this trigger had shown before the slow poll
    theirs_to: int | None = None  # the last line the other trigger showed
    stood_by_at: float | None = None

    async def _read_checkpoint(self):
        self.reads += 1
        if self.reads == 1:  # at the start: no checkpoint yet
            return None
        assert self._state is not None
        assert self._shown is not None
        if self.theirs_to is None:
            self.shown_before = self._shown["cursors"]["t/stdout.txt"]["offset"] // LINE_BYTES
            read = self._state.cursors["t/stdout.txt"]["offset"] // LINE_BYTES
            self.theirs_to = read + self.skipped
        theirs = self._state.to_json()
        theirs["cursors"]["t/stdout.txt"]["offset"] = self.theirs_to * LINE_BYTES
        return theirs

    async def _stand_by(self, theirs, late):
        self.stood_by_at = self.stood_by_at or time.time()
        return await super()._stand_by(theirs, late)


def _run_with_faults(service, trigger: AzureBatchJobTrigger, faults: str) -> tuple[TriggerEvent, list[str], list[int]]:
    """The trigger run to its event while the local service answers as ``faults`` says: the event, the log's
    messages, and the numbers of the lines shown (logged, then carried in the event for the task)."""
    service.set_faults(faults)
    try:
        with captured_logs() as logs:
            event = asyncio.run(asyncio.wait_for(anext(trigger.run()), 60))
    finally:
        service.set_faults("")
    said = messages(logs)
    logged = [line for line in said if line.startswith("[t] line ")]
    carried = [line for task, line in event.payload.get("lines", []) if task == "t"]
    return event, said, [int(line.split()[-1]) for line in logged + carried]


@pytest.mark.serial
def test_a_poll_that_spans_a_stall_shows_nothing_it_read(
    azbatch_default, local_batch_service, shared_pool, monkeypatch
):
    # What the poll read while the other trigger had the job may have been shown by that one: not shown here, and
    # read again (from where this trigger had shown) once it knows where the other one got to.
    monkeypatch.setenv("AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD", "1")
    monkeypatch.setattr(handover, "STALL_SETTLE_SECONDS", 0.3)
    monkeypatch.setattr(handover, "STAND_BY_FRACTION", 1.0)
    shown_at: list[float] = []
    show = watch_events.PollLines.show

    def timed_show(self) -> None:
        shown_at.extend(time.time() for _ in self._held)
        show(self)

    monkeypatch.setattr(watch_events.PollLines, "show", timed_show)
    job_id = _running_job(shared_pool, sh("for n in $(seq 1 40); do printf 'line %03d\\n' $n; sleep 0.15; done"))
    trigger = SpansAStall(
        "azbatch_default", WatchState(job_id=job_id, expected_tasks=1, streamed=["t"]).to_json(), poll_interval=0.2
    )
    local_batch_service.clear_request_log()
    event, _, shown = _run_with_faults(local_batch_service, trigger, "Jobs_GetJobTaskCounts:latency=1.5#4")
    assert event.payload["status"] == "done"
    before, theirs = trigger.shown_before, trigger.theirs_to
    assert before is not None
    assert theirs is not None
    assert before + SpansAStall.skipped < theirs < 40
    # What the other trigger showed (all that the slow poll read, and more) is not shown again here.
    assert shown == [n for n in range(1, 41) if not before < n <= theirs]
    # The slow poll showed nothing when it ended: no line from its answer until the trigger stood by.
    slow = local_batch_service.request_log(jobs=[job_id], operations=["Jobs_GetJobTaskCounts"])[3]["at"]
    assert trigger.stood_by_at is not None
    assert trigger.stood_by_at > slow + 1.5
    assert [at for at in shown_at if slow + 0.5 < at < trigger.stood_by_at] == []


def test_a_slow_poll_with_no_other_trigger_shows_what_it_read(
    azbatch_default, local_batch_service, shared_pool, monkeypatch
):
    # As long as a stall, but no other trigger took the job over: what the poll read is shown, once, a settle later.
    monkeypatch.setenv("AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD", "1")
    monkeypatch.setattr(handover, "STALL_SETTLE_SECONDS", 0.3)
    job_id = _running_job(shared_pool, sh("for n in $(seq 1 40); do printf 'line %03d\\n' $n; sleep 0.15; done"))
    trigger = AzureBatchJobTrigger(
        "azbatch_default", WatchState(job_id=job_id, expected_tasks=1, streamed=["t"]).to_json(), poll_interval=0.2
    )
    event, said, shown = _run_with_faults(local_batch_service, trigger, "Jobs_GetJobTaskCounts:latency=1.5#2-3")
    assert event.payload["status"] == "done"
    assert shown == list(range(1, 41))
    assert not any(line.startswith("This triggerer stalled for ") for line in said)
