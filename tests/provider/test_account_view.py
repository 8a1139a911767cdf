"""The account view (one look at an account's jobs for all the triggers of a triggerer) against the local Batch
service: transitions between looks, deleted jobs, a failing credential, an overloaded service, cancellation,
several triggerers."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid

import pytest
from azure.batch import models as m

from airflow_provider_azbatch.hooks import batch_async
from airflow_provider_azbatch.hooks.batch import AzureBatchHook
from airflow_provider_azbatch.specs.tasks import TaskSpec
from airflow_provider_azbatch.submission.job import JobSubmission
from airflow_provider_azbatch.submission.reattach import submit
from airflow_provider_azbatch.triggers import account_view, pool_nodes
from airflow_provider_azbatch.triggers.job import AzureBatchJobTrigger
from airflow_provider_azbatch.watching.state import WatchState
from tests.airflow_helpers import azbatch_connection_json, captured_logs, messages
from tests.helpers import BackgroundTrigger, sh, wait_until, wait_until_async


def _job(hook: AzureBatchHook, pool: str, command: str, tasks: int = 1) -> str:
    job_id = f"view-{uuid.uuid4().hex[:8]}"
    specs = [TaskSpec(id=f"t{i}", command_line=command) for i in range(tasks)]
    submit(hook, JobSubmission(job_id=job_id, pool_id=pool, tasks=specs))
    return job_id


def _trigger(job_id: str, conn_id: str = "azbatch_default", poll_interval: float = 0.5) -> AzureBatchJobTrigger:
    state = WatchState(job_id=job_id, expected_tasks=1).to_json()
    return AzureBatchJobTrigger(conn_id, state, poll_interval=poll_interval, stream_output=False)


@pytest.fixture
def slow_own_looks(monkeypatch):
    """Triggers look at their own jobs at most every 60 s: what they learn sooner, they learn from the view."""
    monkeypatch.setenv("AIRFLOW__AZBATCH__JOB_LOOKS_PER_SECOND", "0.001")


@pytest.mark.serial
def test_a_transition_between_two_looks_is_reported_once(local_batch_service, azbatch_default, shared_pool):
    hook = AzureBatchHook()
    job_id = _job(hook, shared_pool, "sleep 30")

    async def watch() -> tuple[bool, int, int]:
        subscription = await account_view.subscribe("azbatch_default", job_id, 0.3)
        view = subscription.view
        try:
            looks = view.looks
            await asyncio.to_thread(wait_until, lambda: view.looks > looks + 1, what="two looks")
            # Between two looks (0.3 s apart), the job ends (active, terminating, completed): the next look lists it.
            await asyncio.to_thread(hook.terminate_job, job_id, "between looks", wait=True)
            first = await subscription.wait(10)
            # The looks that follow overlap the earlier ones by 5 s: they list the job again for 5 s, and each
            # transition is reported once (terminating and completed, or both seen at once: one).
            local_batch_service.reset_request_counts()
            reports = 0
            deadline = time.time() + 7
            while time.time() < deadline:
                reports += await subscription.wait(deadline - time.time())
            return first, reports, local_batch_service.request_counts().get("Jobs_ListJobs", 0)
        finally:
            await subscription.close()

    changed, reported_again, looks = asyncio.run(watch())
    assert changed is True
    assert reported_again <= 1  # at most its completion after its termination
    assert 10 <= looks <= 26  # one look per 0.3 s for the whole account
    assert account_view.open_view_count() == 0


@pytest.mark.serial
def test_a_job_ended_between_looks_fires_its_event_within_a_poll(azbatch_default, shared_pool, slow_own_looks):
    hook = AzureBatchHook()
    job_id = _job(hook, shared_pool, "sleep 2")

    async def run() -> tuple[dict, float]:
        event = await asyncio.wait_for(anext(_trigger(job_id).run()), 30)
        return event.payload, time.time()

    payload, fired = asyncio.run(run())
    assert payload["status"] == "done"
    ended = hook.client.get_job(job_id).state_transition_time.timestamp()
    assert fired - ended < 0.5 + 2  # a poll (the view's look) and the trigger's own look, not its 60 s


@pytest.mark.serial
def test_a_deleted_job_ends_its_trigger_at_the_next_look(azbatch_default, shared_pool, slow_own_looks):
    hook = AzureBatchHook()
    job_id = _job(hook, shared_pool, "sleep 60")
    wait_until(lambda: hook.get_task_counts(job_id).running == 1, what="the task running")

    async def run() -> dict:
        trigger_run = asyncio.ensure_future(anext(_trigger(job_id).run()))
        await asyncio.sleep(1.5)  # the trigger looked at its job and waits on the view
        await asyncio.to_thread(hook.delete_job, job_id)
        return (await asyncio.wait_for(trigger_run, 20)).payload

    started = time.time()
    payload = asyncio.run(run())
    assert time.time() - started < 15
    # The view listed it as deleting, the trigger looked: its task was stopped, the job is over (the task reports
    # how), seconds after the deletion rather than at the trigger's own look a minute later.
    assert payload["status"] == "done"
    assert payload["watch_state"]["counts"]["running"] == 0


def test_an_account_whose_credential_fails_leaves_the_other_watching(
    local_batch_service, azbatch_default, shared_pool, monkeypatch, caplog
):
    refused = azbatch_connection_json(local_batch_service).replace(
        local_batch_service.account_key, "d3Jvbmcta2V5LXdyb25nLWtleS13cm9uZy1rZXktMTIzNA=="
    )
    monkeypatch.setenv("AIRFLOW_CONN_AZBATCH_REFUSED", refused)
    hook = AzureBatchHook()
    ours = _job(hook, shared_pool, "sleep 2")
    theirs = _job(hook, shared_pool, "sleep 2")

    # Which views are made (one per connection), recorded as they are: the refused one may be gone again
    # before a sample of the open views could see both.
    made: list[str] = []
    make_view = account_view.AccountView.__init__

    def recording(view: account_view.AccountView, conn_id: str) -> None:
        made.append(conn_id)
        make_view(view, conn_id)

    monkeypatch.setattr(account_view.AccountView, "__init__", recording)

    async def run() -> list[dict]:
        runs = await asyncio.gather(anext(_trigger(ours).run()), anext(_trigger(theirs, "azbatch_refused").run()))
        return [event.payload for event in runs]

    payloads = asyncio.run(asyncio.wait_for(run(), 60))
    assert payloads[0]["status"] == "done"
    assert payloads[1]["status"] == "error"
    assert payloads[1]["permanent"] is True
    assert "AuthenticationFailed" in payloads[1]["message"] or "Authentication" in payloads[1]["message"]
    assert sorted(made) == ["azbatch_default", "azbatch_refused"]  # one view per connection
    assert any(line.startswith("Batch account view of connection 'azbatch_refused': ") for line in caplog.messages)
    assert account_view.open_view_count() == 0
    assert batch_async.open_client_count() == 0


def test_an_overloaded_service_is_looked_at_again_after_its_retry_after(
    local_batch_service, azbatch_default, shared_pool, slow_own_looks, caplog
):
    hook = AzureBatchHook()
    job_id = _job(hook, shared_pool, "sleep 3")
    # From the view's second listing on, 8 in a row are answered 503 ServerBusy (Retry-After: 0.1 s). The client
    # retries a bad status 3 times (azure-core's retry_status): two looks fail, four answers each, and the view
    # backs off after each (1 s, then 2 s, with jitter); the third look after the first is answered.
    local_batch_service.set_faults("Jobs_ListJobs:503/retry-after=0.1#2-9")
    try:

        async def run() -> tuple[dict, int, int]:
            trigger_run = asyncio.ensure_future(anext(_trigger(job_id).run()))
            view = await _view_of("azbatch_default")
            # The trigger's own looks are a minute apart (slow_own_looks): the job's end comes from the view.
            event = await asyncio.wait_for(trigger_run, 30)
            return event.payload, view.failures, view.looks

        payload, failures, looks = asyncio.run(run())
    finally:
        local_batch_service.set_faults("")
    assert payload["status"] == "done"
    assert failures == 2
    assert looks >= 2  # and it recovered
    warnings = [line for line in caplog.messages if line.startswith("Batch account view of connection")]
    assert len(warnings) == 1  # once per outage
    assert "ServerBusy" in warnings[0] or "503" in warnings[0]


async def _view_of(conn_id: str) -> account_view.AccountView:
    key = (id(asyncio.get_running_loop()), conn_id)
    while key not in account_view._views:
        await asyncio.sleep(0.01)
    return account_view._views[key]


def test_a_trigger_cancelled_mid_look_leaves_the_others_watching(local_batch_service, azbatch_default, shared_pool):
    hook = AzureBatchHook()
    cancelled = _job(hook, shared_pool, "sleep 30")
    watched = _job(hook, shared_pool, "sleep 3")
    # Every look takes 0.4 s: a cancellation lands in one.
    local_batch_service.set_faults("Jobs_ListJobs:latency=0.4")
    try:

        async def run() -> tuple[dict, int, int]:
            first = asyncio.ensure_future(anext(_trigger(cancelled).run()))
            second = asyncio.ensure_future(anext(_trigger(watched).run()))
            view = await _view_of("azbatch_default")
            await asyncio.sleep(1.3)
            first.cancel()
            with pytest.raises(asyncio.CancelledError):
                await first
            size = view.size
            event = await asyncio.wait_for(second, 30)
            return event.payload, size, view.looks

        payload, size_after_cancel, looks = asyncio.run(run())
    finally:
        local_batch_service.set_faults("")
        hook.terminate_job(cancelled)
    assert payload["status"] == "done"
    assert size_after_cancel == 1  # the cancelled trigger left the view; the other kept it going
    assert looks >= 3
    assert account_view.open_view_count() == 0
    assert batch_async.open_client_count() == 0


def test_two_triggerers_each_have_their_own_view(local_batch_service, azbatch_default, shared_pool):
    hook = AzureBatchHook()
    job_id = _job(hook, shared_pool, "sleep 2")
    results: dict[str, object] = {}

    def triggerer(name: str) -> None:
        async def run() -> None:
            trigger_run = asyncio.ensure_future(anext(_trigger(job_id).run()))
            view = await _view_of("azbatch_default")
            event = await asyncio.wait_for(trigger_run, 30)
            results[name] = (event.payload["status"], id(view), view.looks)

        asyncio.run(run())

    threads = [threading.Thread(target=triggerer, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    (status_a, view_a, looks_a), (status_b, view_b, looks_b) = results["a"], results["b"]  # type: ignore[misc]
    assert (status_a, status_b) == ("done", "done")
    assert view_a != view_b
    assert looks_a >= 1
    assert looks_b >= 1
    assert account_view.open_view_count() == 0


def test_one_deferred_jobs_idle_poll_costs_one_request(local_batch_service, azbatch_default, shared_pool):
    hook = AzureBatchHook()
    job_id = _job(hook, shared_pool, "sleep 60")
    wait_until(lambda: hook.get_task_counts(job_id).running == 1, what="the task running")
    try:
        with BackgroundTrigger(_trigger(job_id, poll_interval=0.5)):
            # Its first looks at the job; then nothing moves, and its looks at it come twice as far apart each
            # time (a minute apart at most): the view's listing, one request a poll, tells it of any change.
            wait_until(lambda: local_batch_service.request_log(operations=["Jobs_ListJobs"]), what="a look")
            time.sleep(4)
            local_batch_service.clear_request_log()
            time.sleep(10)
            served = [request["operation"] for request in local_batch_service.request_log()]
    finally:
        hook.terminate_job(job_id)
    polls = 10 / 0.5
    assert polls - 2 <= served.count("Jobs_ListJobs") <= polls + 2
    assert len(served) - served.count("Jobs_ListJobs") <= 1  # a look at the job, 8 s after the one before
    assert len(served) <= polls + 2


def test_output_shows_while_the_jobs_state_is_unchanged(local_batch_service, azbatch_default, shared_pool):
    hook = AzureBatchHook()
    script = "i=0; while [ $i -lt 40 ]; do i=$((i+1)); echo line $i; sleep 0.5; done"
    job_id = _job(hook, shared_pool, sh(script))
    wait_until(lambda: hook.get_task_counts(job_id).running == 1, what="the task running")
    state = WatchState(job_id=job_id, expected_tasks=1, streamed=["t0"]).to_json()
    trigger = AzureBatchJobTrigger("azbatch_default", state, poll_interval=0.5)
    try:
        with captured_logs() as logs, BackgroundTrigger(trigger) as background:
            wait_until(lambda: "[t0] line 3" in messages(logs), what="the third line in the log")
            local_batch_service.clear_request_log()
            shown = len([line for line in messages(logs) if line.startswith("[t0] line ")])
            wait_until(
                lambda: len([line for line in messages(logs) if line.startswith("[t0] line ")]) >= shown + 8,
                timeout=15,
                what="eight more lines",
            )
            served = local_batch_service.request_log()
            job = hook.client.get_job(job_id)
            lines = [line for line in messages(logs) if line.startswith("[t0] line ")]
            assert background.events == []  # the trigger still waits: the job runs
    finally:
        hook.terminate_job(job_id)
    assert job.state == m.BatchJobState.ACTIVE
    # The lines came in order, each once, while the view reported no change of the job: each was read on the
    # trigger's own cadence (a read straight from where the last one ended, one request a poll), not at a look.
    assert lines == [f"[t0] line {k}" for k in range(1, len(lines) + 1)]
    operations = {request["operation"] for request in served}
    assert "Tasks_GetTaskFile" in operations
    assert not {op for op in operations if op.startswith("Jobs_GetJob") and op != "Jobs_GetJobTaskCounts"}


def test_jobs_resting_on_a_pool_look_at_themselves_when_its_listing_sees_their_tasks_move(
    local_batch_service, azbatch_default, shared_pool, monkeypatch, tmp_path
):
    # Two resting jobs are enough for a pulse here (twelve in a triggerer), listed every second (five).
    monkeypatch.setattr(pool_nodes, "PULSE_MIN_JOBS", 2)
    monkeypatch.setattr(pool_nodes, "LISTING_SECONDS", 1.0)
    hook = AzureBatchHook()
    release = tmp_path / "release"
    held = sh(f"while [ ! -f {release} ]; do sleep 0.1; done")
    quiet = [_job(hook, shared_pool, "sleep 120") for _ in range(2)]
    moving = f"view-{uuid.uuid4().hex[:8]}"
    tasks = [TaskSpec(id="t0", command_line="sleep 120"), TaskSpec(id="t1", command_line=held)]
    submit(hook, JobSubmission(job_id=moving, pool_id=shared_pool, tasks=tasks))
    jobs = [*quiet, moving]
    wait_until(lambda: [hook.get_task_counts(job).running for job in jobs] == [1, 1, 2], what="every task running")
    progress = f"Batch job {moving}: 0 active, 1 running, 1 succeeded, 0 failed of 2"

    async def run(logs: list[dict]) -> tuple[list[str], list[str]]:
        triggers = []
        for job, expected in ((quiet[0], 1), (quiet[1], 1), (moving, 2)):
            state = WatchState(job_id=job, expected_tasks=expected, pool_id=shared_pool).to_json()
            trigger = AzureBatchJobTrigger("azbatch_default", state, poll_interval=0.5, stream_output=False)
            triggers.append(asyncio.ensure_future(anext(trigger.run())))
        view = await _view_of("azbatch_default")
        try:
            pool = view.pools.pool(shared_pool)
            await wait_until_async(lambda: pool.covered == 3, 30, "the pulse covering the three resting jobs")
            local_batch_service.clear_request_log()
            await asyncio.sleep(3)  # a window in which nothing moves
            quiet_window = [request["operation"] for request in local_batch_service.request_log()]
            local_batch_service.clear_request_log()
            release.touch()
            await wait_until_async(lambda: progress in messages(logs), 20, "the moving job's progress line")
            moved_window = [request["operation"] for request in local_batch_service.request_log()]
        finally:
            for each in triggers:
                each.cancel()
            await asyncio.gather(*triggers, return_exceptions=True)
        return quiet_window, moved_window

    try:
        with captured_logs() as logs:
            quiet_window, moved_window = asyncio.run(run(logs))
    finally:
        for job in jobs:
            hook.terminate_job(job)
    # While nothing moved: the view's listing every poll and the pool's nodes every second (the pulse), no look at
    # any job.
    assert set(quiet_window) == {"Jobs_ListJobs", "Nodes_ListNodes"}
    assert 4 <= quiet_window.count("Jobs_ListJobs") <= 8
    assert 2 <= quiet_window.count("Nodes_ListNodes") <= 4
    # Its task ended on a node the pulse listed: the job (and those whose tasks ran on that node) looked at itself.
    assert 1 <= moved_window.count("Jobs_GetJobTaskCounts") <= 3
