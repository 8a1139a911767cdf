"""A watching trigger cancelled by its triggerer terminates its job when the task was killed, and only then, on
the line the tests run on: 3.3 says so through ``on_kill``; before, the cancelled trigger asks (triggers/kill.py).
Against the local Batch service; what the triggerer answers about the task instance is given by the test (the
real answers, on each line: tests/lines/test_trigger_requests.py and tests/airflow_run)."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from azure.batch import models as m

from airflow_provider_azbatch import compat
from airflow_provider_azbatch.hooks.batch import AzureBatchHook
from airflow_provider_azbatch.specs.tasks import TaskSpec
from airflow_provider_azbatch.submission.job import JobSubmission
from airflow_provider_azbatch.submission.reattach import submit
from airflow_provider_azbatch.triggers.job import AzureBatchJobTrigger
from airflow_provider_azbatch.watching.state import WatchState
from tests.airflow_helpers import captured_logs, messages
from tests.helpers import wait_until


def _running_job(pool: str) -> str:
    hook = AzureBatchHook()
    job_id = f"kill-{uuid.uuid4().hex[:8]}"
    submit(hook, JobSubmission(job_id=job_id, pool_id=pool, tasks=[TaskSpec(id="t", command_line="sleep 60")]))
    wait_until(lambda: hook.get_task_counts(job_id).running == 1, what="the task running")
    return job_id


class Answers(AzureBatchJobTrigger):
    """The trigger of try 1 of a task instance, the triggerer answering ``state`` and ``claim`` about it."""

    state = "deferred"
    claim: dict[str, Any] | None = None
    asked = 0

    async def _task_state(self) -> str | None:
        type(self).asked += 1
        return self.state

    async def _job_claim(self) -> dict[str, Any] | None:
        return self.claim

    def _try_number(self) -> int | None:
        return 1


def _trigger(job_id: str, state: str, claim: dict[str, Any] | None = None) -> Answers:
    Answers.state, Answers.claim, Answers.asked = state, claim, 0
    return Answers("azbatch_default", WatchState(job_id=job_id).to_json(), poll_interval=0.2, terminate_on_kill=True)


def _cancelled(trigger: AzureBatchJobTrigger, times: int = 1) -> None:
    """Run the trigger until it polled, then cancel it as a triggerer does: ``times`` times, a moment apart."""

    async def scenario() -> None:
        run = asyncio.ensure_future(trigger.run().__anext__())
        await asyncio.sleep(1.0)
        for _ in range(times):
            run.cancel()
            await asyncio.sleep(0.05)
        with pytest.raises(asyncio.CancelledError):
            await run
        while job_trigger_killing():
            await asyncio.sleep(0.05)

    asyncio.run(scenario())


def job_trigger_killing() -> set:
    from airflow_provider_azbatch.triggers import kill

    return kill._killing


def _state(batch_client, job_id: str) -> m.BatchJobState:
    return batch_client.get_job(job_id).state


@pytest.mark.skipif(compat.TRIGGER_ON_KILL, reason="3.3 tells the trigger of a kill: on_kill")
@pytest.mark.parametrize(("state", "why"), [("failed", "the task was marked failed"), ("none", "the task was cleared")])
def test_a_trigger_cancelled_because_its_task_was_killed_terminates_its_job(
    azbatch_default, shared_pool, batch_client, state, why
):
    job_id = _running_job(shared_pool)
    with captured_logs() as logs:
        _cancelled(_trigger(job_id, state), times=3)  # the triggerer repeats its cancellation: one check
    job = wait_until(lambda: (j := batch_client.get_job(job_id)).state == m.BatchJobState.COMPLETED and j)
    assert job.execution_info.termination_reason == "AirflowTaskKilled"
    assert f"Terminated Batch job {job_id} (the Airflow task was killed: {why})" in messages(logs)
    assert Answers.asked == 1


@pytest.mark.skipif(compat.TRIGGER_ON_KILL, reason="3.3 tells the trigger of a kill: on_kill")
def test_a_trigger_cancelled_by_a_restart_or_a_handover_leaves_its_job(
    azbatch_default, local_batch_service, shared_pool, batch_client
):
    job_id = _running_job(shared_pool)
    with captured_logs() as logs:
        _cancelled(_trigger(job_id, "deferred"))
    assert _state(batch_client, job_id) == m.BatchJobState.ACTIVE
    assert f"Batch job {job_id} goes on: the task is still deferred " in "\n".join(messages(logs))
    # Cleared, and the next try already reattached to this job: it is that try's now.
    with captured_logs() as logs:
        _cancelled(_trigger(job_id, "deferred", {"job_id": job_id, "try_number": 2}))
    assert _state(batch_client, job_id) == m.BatchJobState.ACTIVE
    assert f"Batch job {job_id} goes on: try 2 of the task watches it now" in messages(logs)
    assert local_batch_service.request_log(jobs=[job_id], operations=["Jobs_TerminateJob"]) == []
    AzureBatchHook().terminate_job(job_id)


@pytest.mark.skipif(compat.TRIGGER_ON_KILL, reason="3.3 tells the trigger of a kill: on_kill")
def test_a_trigger_cancelled_at_airflows_deferral_timeout_leaves_the_job_to_the_task(
    azbatch_default, shared_pool, batch_client
):
    job_id = _running_job(shared_pool)
    trigger = _trigger(job_id, "scheduled")
    trigger.timeout_after = datetime.now(timezone.utc) + timedelta(seconds=0.5)  # as the triggerer sets it
    with captured_logs() as logs:
        _cancelled(trigger)
    assert _state(batch_client, job_id) == m.BatchJobState.ACTIVE
    assert f"Batch job {job_id}: the deferral timed out; the task ends the job when it resumes" in messages(logs)
    assert Answers.asked == 0
    AzureBatchHook().terminate_job(job_id)


@pytest.mark.skipif(not compat.TRIGGER_ON_KILL, reason="before 3.3 the cancellation itself is the question")
def test_on_3_3_a_cancellation_alone_asks_nothing_on_kill_does(azbatch_default, shared_pool, batch_client):
    job_id = _running_job(shared_pool)
    trigger = _trigger(job_id, "failed")
    _cancelled(trigger)  # a shutdown's cancellation: no on_kill
    assert (_state(batch_client, job_id), Answers.asked) == (m.BatchJobState.ACTIVE, 0)
    asyncio.run(trigger.on_kill())
    job = wait_until(lambda: (j := batch_client.get_job(job_id)).state == m.BatchJobState.COMPLETED and j)
    assert job.execution_info.termination_reason == "AirflowTaskKilled"


class SlowStart(Answers):
    """A trigger on a fresh triggerer, whose first checkpoint read takes long."""

    async def _starting_state(self, not_before: float) -> dict[str, Any]:
        await asyncio.sleep(60)
        return self.watch_state


@pytest.mark.skipif(compat.TRIGGER_ON_KILL, reason="3.3 tells the trigger of a kill: on_kill")
def test_a_trigger_killed_while_it_reads_its_checkpoint_terminates_its_job(azbatch_default, shared_pool, batch_client):
    job_id = _running_job(shared_pool)
    Answers.state, Answers.claim, Answers.asked = "failed", None, 0
    trigger = SlowStart("azbatch_default", WatchState(job_id=job_id).to_json(), terminate_on_kill=True)
    _cancelled(trigger)
    job = wait_until(lambda: (j := batch_client.get_job(job_id)).state == m.BatchJobState.COMPLETED and j)
    assert job.execution_info.termination_reason == "AirflowTaskKilled"


class Stopping(Answers):
    """A trigger on a triggerer that stops gracefully: once ``stopping`` is set it answers no request any more
    (its requests channel is closed before its triggers are cancelled), and notes each request it is sent."""

    stopping = False
    requests: list[str] = []

    async def _unanswered_once_stopping(self, request: str) -> None:
        type(self).requests.append(request)
        if self.stopping:
            await asyncio.Event().wait()

    async def _write_checkpoint(self, state: dict[str, Any]) -> None:
        await self._unanswered_once_stopping("checkpoint")

    async def _task_state(self) -> str | None:
        type(self).requests.append("task state")
        await asyncio.Event().wait()
        return None


@pytest.fixture
def stopping_triggerer(monkeypatch):
    from airflow_provider_azbatch.triggers import checkpoints, kill

    monkeypatch.setattr(kill, "TRIGGER_ON_KILL", False)  # the question is asked on every line here
    monkeypatch.setattr(checkpoints, "FINAL_CHECKPOINT_SECONDS", 0.5)
    monkeypatch.setattr(checkpoints, "FRESH_SECONDS", 0.0)
    return kill.KILL_CHECK_SECONDS


def test_a_stopping_triggerers_trigger_sends_its_last_checkpoint_first_and_holds_no_exit(
    azbatch_default, shared_pool, stopping_triggerer
):
    # 3.0-3.2 cancel a trigger on a stop as on a kill, and a triggerer answers its requests in order: the last
    # checkpoint goes before the kill check's question, or a stopping triggerer exits before serving it (lines
    # shown again by the next triggerer). Unanswered, the kill check goes on in the background: holding the
    # trigger would only hold the triggerer's exit (until its SIGKILL, 20 s later).
    hook, job_id = AzureBatchHook(), f"stop-{uuid.uuid4().hex[:8]}"
    task = TaskSpec(id="t", command_line="bash -c 'for i in $(seq 1 600); do echo line $i; sleep 0.05; done'")
    submit(hook, JobSubmission(job_id=job_id, pool_id=shared_pool, tasks=[task]))
    Answers.state, Answers.claim, Stopping.stopping, Stopping.requests = "deferred", None, False, []
    start = WatchState(job_id=job_id, expected_tasks=1, streamed=["t"]).to_json()
    trigger = Stopping("azbatch_default", start, poll_interval=0.2, terminate_on_kill=True)

    async def scenario(logs: list[dict[str, Any]]) -> float:
        run = asyncio.ensure_future(trigger.run().__anext__())
        await asyncio.to_thread(wait_until, lambda: "checkpoint" in Stopping.requests, what="a first checkpoint")

        def lines() -> int:
            return sum(message.startswith("[t] line ") for message in messages(logs))

        # Lines shown since that checkpoint: the last one has something to write.
        shown = lines()
        await asyncio.to_thread(wait_until, lambda: lines() > shown, what="more lines shown")
        Stopping.stopping = True
        Stopping.requests.clear()
        cancelled = time.monotonic()
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        return time.monotonic() - cancelled

    with captured_logs() as logs:
        took = asyncio.run(scenario(logs))
    assert Stopping.requests == ["checkpoint", "task state"]
    assert took < stopping_triggerer / 2
    hook.terminate_job(job_id)
