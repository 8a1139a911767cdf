"""AzureBatchJobTrigger against the local Batch service: cost, resilience, sharing, kill."""

from __future__ import annotations

import asyncio
import json
import time
import uuid

import pytest
from azure.batch import models as m

from airflow_provider_azbatch.hooks import batch_async
from airflow_provider_azbatch.hooks.batch import AzureBatchHook
from airflow_provider_azbatch.hooks.batch_async import AzureBatchAsyncHook
from airflow_provider_azbatch.specs.tasks import TaskSpec
from airflow_provider_azbatch.submission.job import JobSubmission
from airflow_provider_azbatch.submission.reattach import submit
from airflow_provider_azbatch.triggers import watch_events
from airflow_provider_azbatch.triggers.job import AzureBatchJobTrigger
from airflow_provider_azbatch.watching.core import JobWatcher
from airflow_provider_azbatch.watching.drivers import run_async, run_sync
from airflow_provider_azbatch.watching.state import WatchState
from tests.airflow_helpers import captured_logs, messages
from tests.helpers import pool_options, sh, wait_until


def _job(hook: AzureBatchHook, pool: str, tasks: list[TaskSpec]) -> str:
    job_id = f"trig-{uuid.uuid4().hex[:8]}"
    submit(hook, JobSubmission(job_id=job_id, pool_id=pool, tasks=tasks))
    return job_id


def _first_event(trigger: AzureBatchJobTrigger, timeout: float = 60):
    async def first():
        return await asyncio.wait_for(anext(trigger.run()), timeout)

    return asyncio.run(first())


def test_serialize_round_trip_carries_no_secret(azbatch_default):
    trigger = AzureBatchJobTrigger("azbatch_default", WatchState(job_id="j").to_json(), poll_interval=2, deadline=123.0)
    classpath, kwargs = trigger.serialize()
    assert classpath == "airflow_provider_azbatch.triggers.job.AzureBatchJobTrigger"
    rebuilt = AzureBatchJobTrigger(**kwargs)
    assert rebuilt.serialize() == (classpath, kwargs)
    assert azbatch_default.account_key not in json.dumps(kwargs)


def test_an_idle_poll_costs_one_request_two_while_tasks_wait(
    local_batch_service, azbatch_default, batch_client, shared_pool
):
    # A pool without nodes: the tasks wait, nothing changes between polls.
    batch_client.create_pool(pool_options("empty-pool", nodes=0))
    hook = AzureBatchHook()
    tasks = [TaskSpec(id=f"t{i:04d}", command_line="true") for i in range(1000)]
    job_id = _job(hook, "empty-pool", tasks)
    watcher = JobWatcher(
        WatchState(job_id=job_id, expected_tasks=1000, streamed=[t.id for t in tasks[:20]]), lambda task, line: None
    )

    # The tasks wait for nodes: each poll also reads the job (a termination from outside moves no count).
    async def polls():
        hook = AzureBatchAsyncHook()
        async with hook.connected():
            await run_async(watcher.step(0.0), hook)  # first poll: sets up
            local_batch_service.reset_request_counts()
            done = await run_async(watcher.step(1.0), hook)
            return done, local_batch_service.request_counts()

    done, counts = asyncio.run(polls())
    assert done is False
    assert counts == {"Jobs_GetJobTaskCounts": 1, "Jobs_GetJob": 1}

    # Running tasks (their output not streamed): one request per poll.
    running = _job(hook, shared_pool, [TaskSpec(id=f"r{i}", command_line="sleep 30") for i in range(8)])
    wait_until(lambda: hook.get_task_counts(running).running == 8, what="8 tasks running")
    watcher = JobWatcher(WatchState(job_id=running, expected_tasks=8), lambda task, line: None, stream_output=False)

    async def running_polls():
        hook = AzureBatchAsyncHook()
        async with hook.connected():
            await run_async(watcher.step(0.0), hook)
            local_batch_service.reset_request_counts()
            for second in range(1, 6):
                await run_async(watcher.step(float(second)), hook)
            return local_batch_service.request_counts()

    assert asyncio.run(running_polls()) == {"Jobs_GetJobTaskCounts": 5}
    hook.terminate_job(running)


def test_transient_errors_are_waited_out(local_batch_service, azbatch_default, shared_pool):
    hook = AzureBatchHook()
    job_id = _job(hook, shared_pool, [TaskSpec(id="t", command_line="echo survived; sleep 1")])
    # Every task-count request fails for a while: 503 with Retry-After, then dropped connections.
    local_batch_service.set_faults("Jobs_GetJobTaskCounts:503/retry-after=1#1-6;Jobs_GetJobTaskCounts:drop#7-9")
    try:
        trigger = AzureBatchJobTrigger(
            "azbatch_default", WatchState(job_id=job_id, expected_tasks=1).to_json(), poll_interval=0.2
        )
        event = _first_event(trigger)
    finally:
        local_batch_service.set_faults("")
    assert event.payload["status"] == "done"


def test_a_long_outage_becomes_an_error_event_with_its_cause(local_batch_service, azbatch_default, shared_pool):
    hook = AzureBatchHook()
    job_id = _job(hook, shared_pool, [TaskSpec(id="t", command_line="sleep 5")])
    local_batch_service.set_faults("Jobs_GetJobTaskCounts:500")
    try:
        trigger = AzureBatchJobTrigger(
            "azbatch_default", WatchState(job_id=job_id, expected_tasks=1).to_json(), poll_interval=0.2, max_outage=2
        )
        event = _first_event(trigger)
    finally:
        local_batch_service.set_faults("")
    assert event.payload["status"] == "error"
    assert event.payload["permanent"] is False
    assert event.payload["message"].startswith(f"Batch job {job_id}: the Batch service kept failing for ")
    assert (
        "(max_outage 2 s); last error: InternalError: Server encountered an internal error." in event.payload["message"]
    )


def test_a_deleted_job_fails_fast(azbatch_default, shared_pool):
    hook = AzureBatchHook()
    job_id = _job(hook, shared_pool, [TaskSpec(id="t", command_line="sleep 30")])
    hook.delete_job(job_id, wait=True)
    trigger = AzureBatchJobTrigger("azbatch_default", WatchState(job_id=job_id).to_json(), poll_interval=0.2)
    event = _first_event(trigger, timeout=20)
    assert event.payload == {
        "status": "error",
        "job_id": job_id,
        "message": f"Batch job {job_id}: JobNotFound: The specified job does not exist.",
        "permanent": True,
        "watch_state": WatchState(job_id=job_id).to_json(),
    }


def test_triggers_of_one_connection_share_one_client(azbatch_default, shared_pool):
    hook = AzureBatchHook()
    jobs = [_job(hook, shared_pool, [TaskSpec(id="t", command_line=f"sleep 1.{i}")]) for i in range(1, 6)]

    async def run_all():
        triggers = [
            AzureBatchJobTrigger("azbatch_default", WatchState(job_id=j, expected_tasks=1).to_json(), poll_interval=0.2)
            for j in jobs
        ]
        runs = asyncio.gather(*(anext(t.run()) for t in triggers))
        open_clients = set()
        while not runs.done():  # sample how many clients are open while the five triggers run
            open_clients.add(batch_async.open_client_count())
            await asyncio.wait([runs], timeout=0.05)
        return open_clients, runs.result()

    open_clients, events = asyncio.run(asyncio.wait_for(run_all(), 60))
    assert open_clients == {0, 1}  # none before the first trigger starts, then one shared by all five
    assert [event.payload["status"] for event in events] == ["done"] * 5
    assert batch_async.open_client_count() == 0


def test_on_kill_terminates_only_when_told(azbatch_default, shared_pool, batch_client):
    hook = AzureBatchHook()
    ours = _job(hook, shared_pool, [TaskSpec(id="t", command_line="sleep 60")])
    theirs = _job(hook, shared_pool, [TaskSpec(id="t", command_line="sleep 60")])
    wait_until(lambda: hook.get_task_counts(ours).running == 1 and hook.get_task_counts(theirs).running == 1)
    asyncio.run(
        AzureBatchJobTrigger("azbatch_default", WatchState(job_id=ours).to_json(), terminate_on_kill=True).on_kill()
    )
    asyncio.run(AzureBatchJobTrigger("azbatch_default", WatchState(job_id=theirs).to_json()).on_kill())
    ended = wait_until(lambda: (j := batch_client.get_job(ours)).state == m.BatchJobState.COMPLETED and j)
    assert ended.execution_info.termination_reason == "AirflowTaskKilled"
    assert batch_client.get_job(theirs).state == m.BatchJobState.ACTIVE
    hook.terminate_job(theirs)


def test_the_last_polls_lines_travel_in_the_event(azbatch_default, shared_pool):
    # A triggerer that learns a trigger is over before it wrote the trigger's last lines to the task's log
    # writes them to its own (Airflow 3.3.2): the lines of the poll that finds the job over are the task's.
    hook = AzureBatchHook()
    job_id = _job(hook, shared_pool, [TaskSpec(id="t", command_line=sh("printf 'first\\nlast\\n'"))])
    wait_until(lambda: hook.get_task_counts(job_id).completed == 1, what="the job over")
    start = WatchState(job_id=job_id, expected_tasks=1, streamed=["t"])
    with captured_logs() as logs:
        event = _first_event(AzureBatchJobTrigger("azbatch_default", start.to_json(), poll_interval=0.2))
    assert event.payload["status"] == "done"
    assert not [line for line in messages(logs) if line.startswith("[t] ")]
    assert [line for task, line in event.payload["lines"] if task == "t"] == ["[t] first", "[t] last"]
    # The event's state has them shown: resumed, the task reads nothing again.
    shown: list[str] = []
    watcher = JobWatcher(WatchState.from_json(event.payload["watch_state"]), lambda task, line: shown.append(line))
    run_sync(watcher.step(0.0), hook)
    assert not watcher.unfinished_output()
    assert [line for line in shown if line.startswith("[t] ")] == []


def test_last_lines_too_many_for_an_event_are_left_to_the_task_to_read_again(azbatch_default, shared_pool, monkeypatch):
    monkeypatch.setattr(watch_events, "EVENT_LINES_CHARS", 10)
    hook = AzureBatchHook()
    job_id = _job(hook, shared_pool, [TaskSpec(id="t", command_line=sh("printf 'first\\nlast\\n'"))])
    wait_until(lambda: hook.get_task_counts(job_id).completed == 1, what="the job over")
    start = WatchState(job_id=job_id, expected_tasks=1, streamed=["t"])
    event = _first_event(AzureBatchJobTrigger("azbatch_default", start.to_json(), poll_interval=0.2))
    assert event.payload["status"] == "done"
    assert "lines" not in event.payload
    assert event.payload["watch_state"] == start.to_json()
    # Resumed, the task reads them (as the operator's flush does), each once.
    shown: list[str] = []
    watcher = JobWatcher(
        WatchState.from_json(event.payload["watch_state"]), lambda task, line: task and shown.append(line)
    )
    while not (run_sync(watcher.step(0.0), hook) and not watcher.unfinished_output()):
        pass
    assert shown == ["[t] first", "[t] last"]


@pytest.mark.serial
def test_no_event_fires_within_min_deferral_seconds_of_the_deferral(azbatch_default, shared_pool, monkeypatch):
    # Airflow's scheduler fails a task resumed before it saw the deferring worker's exit: a job that is over
    # already waits in the triggerer until min_deferral_seconds after the deferral.
    monkeypatch.setenv("AIRFLOW__AZBATCH__MIN_DEFERRAL_SECONDS", "3")
    hook = AzureBatchHook()
    job_id = _job(hook, shared_pool, [TaskSpec(id="t", command_line=sh("echo quick"))])
    wait_until(lambda: hook.get_task_counts(job_id).completed == 1, what="the job over")
    start = WatchState(job_id=job_id, expected_tasks=1, streamed=["t"]).to_json()
    deferred_at = time.time()
    event = _first_event(AzureBatchJobTrigger("azbatch_default", start, poll_interval=0.2, deferred_at=deferred_at))
    assert event.payload["status"] == "done"
    assert time.time() >= deferred_at + 3
    # Never past the deadline, though: a timeout is due then.
    deferred_at = time.time()
    deadline = deferred_at + 1
    trigger = AzureBatchJobTrigger(
        "azbatch_default", start, poll_interval=0.2, deferred_at=deferred_at, deadline=deadline
    )
    event = _first_event(trigger)
    assert event.payload["status"] == "done"
    assert deadline <= time.time() < deferred_at + 3


def test_the_events_lines_are_masked_as_the_log_is(azbatch_default, shared_pool):
    # The event is stored as the task's next_kwargs, outside the log's masking.
    from airflow.sdk.log import mask_secret

    mask_secret("s3cr3t-t0ken-for-the-event")
    hook = AzureBatchHook()
    job_id = _job(hook, shared_pool, [TaskSpec(id="t", command_line=sh("echo token=s3cr3t-t0ken-for-the-event"))])
    wait_until(lambda: hook.get_task_counts(job_id).completed == 1, what="the job over")
    start = WatchState(job_id=job_id, expected_tasks=1, streamed=["t"])
    event = _first_event(AzureBatchJobTrigger("azbatch_default", start.to_json(), poll_interval=0.2))
    assert [line for task, line in event.payload["lines"] if task == "t"] == ["[t] token=***"]
