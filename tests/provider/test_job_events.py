"""The Batch job watcher (``AzureBatchJobCompletedTrigger``) against the local Batch service: jobs submitted with the
SDK directly fire by id prefix, metadata, pool and outcome; each job fires once per watcher, also when two
watchers share the account's view and one of them restarts; the account is looked at once a poll for all."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from azure.batch import models as m

from airflow_provider_azbatch.job_events.cursor import Cursor
from airflow_provider_azbatch.triggers import account_view, job_events
from airflow_provider_azbatch.triggers.job_events import AzureBatchJobCompletedTrigger, cursor_key
from tests.helpers import pool_options, sh, wait_until, wait_until_async


class MemoryStore:
    """The cursors of one test (Airflow Variables in a triggerer; tests/airflow_run runs those)."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    async def load(self, key: str) -> str | None:
        return self.values.get(key)

    async def save(self, key: str, value: str) -> None:
        self.values[key] = value


@pytest.fixture
def store(monkeypatch) -> MemoryStore:
    memory = MemoryStore()
    monkeypatch.setattr(job_events, "cursor_store", lambda: memory)
    return memory


@pytest.fixture(scope="module")
def other_pool(batch_client) -> str:
    batch_client.create_pool(pool_options("events-other", nodes=1))
    wait_until(
        lambda: any(n.state == m.BatchNodeState.IDLE for n in batch_client.list_nodes("events-other")),
        what="events-other pool node",
    )
    return "events-other"


def _job(client: Any, job_id: str, pool: str, exit_code: int = 0, metadata: dict[str, str] | None = None) -> str:
    """A job as TorchX or the CLI submits one: its tasks, then it ends when they are done."""
    client.create_job(
        m.BatchJobCreateOptions(
            id=job_id,
            pool_info=m.BatchPoolInfo(pool_id=pool),
            metadata=[m.BatchMetadataItem(name=k, value=v) for k, v in (metadata or {}).items()] or None,
            uses_task_dependencies=False,
        )
    )
    client.create_task(job_id, m.BatchTaskCreateOptions(id="main", command_line=sh(f"exit {exit_code}")))
    client.update_job(job_id, m.BatchJobUpdateOptions(all_tasks_complete_mode="terminatejob"))
    return job_id


def _completed(client: Any, *job_ids: str) -> Callable[[], bool]:
    return lambda: all(client.get_job(job_id).state == m.BatchJobState.COMPLETED for job_id in job_ids)


class Running:
    """A watcher running in the test's event loop, as the triggerer runs it: its events, and stop/restart."""

    def __init__(self, trigger: AzureBatchJobCompletedTrigger) -> None:
        self.kwargs = trigger.serialize()[1]
        self.events: list[dict[str, Any]] = []
        self._task: asyncio.Task[None] | None = None
        self.start()

    def start(self) -> None:
        trigger = AzureBatchJobCompletedTrigger(**self.kwargs)  # as a triggerer re-creates it

        async def consume() -> None:
            async for event in trigger.run():
                self.events.append(event.payload)

        self._task = asyncio.ensure_future(consume())

    async def stop(self) -> None:
        assert self._task is not None
        self._task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await self._task

    def fired(self) -> list[str]:
        return [event["job_id"] for event in self.events]


def test_jobs_fire_by_prefix_metadata_pool_and_outcome(
    local_batch_service, azbatch_default, batch_client, shared_pool, other_pool, store
):
    run = uuid.uuid4().hex[:6]
    train = AzureBatchJobCompletedTrigger(
        job_id_prefix=f"ev{run}-train-",
        metadata={"app": "train"},
        pool_id=shared_pool,
        outcome="succeeded",
        poll_interval=0.5,
    )
    failures = AzureBatchJobCompletedTrigger(job_id_prefix=f"ev{run}-", outcome="failed", poll_interval=0.5)

    async def scenario() -> tuple[Running, Running, int]:
        watchers = Running(train), Running(failures)
        view = account_view.account_view("azbatch_default")
        await wait_until_async(lambda: view.looks >= 2, what="the view's first looks")
        jobs = [
            _job(batch_client, f"ev{run}-train-ok", shared_pool, 0, {"app": "train"}),
            _job(batch_client, f"ev{run}-train-bad", shared_pool, 3, {"app": "train"}),
            _job(batch_client, f"ev{run}-train-eval", shared_pool, 0, {"app": "eval"}),
            _job(batch_client, f"ev{run}-train-elsewhere", other_pool, 0, {"app": "train"}),
            _job(batch_client, f"other{run}-train-bad", shared_pool, 3, {"app": "train"}),
        ]
        await wait_until_async(_completed(batch_client, *jobs), what="the jobs completed")
        await wait_until_async(lambda: watchers[0].events and watchers[1].events, what="both watchers fired")
        # Three more looks after every job completed: nothing else fires.
        looks = view.looks
        await wait_until_async(lambda: view.looks >= looks + 3, what="three more looks")
        for watcher in watchers:
            await watcher.stop()
        return *watchers, account_view.open_view_count()

    trained, failed, views_left = asyncio.run(scenario())
    assert trained.fired() == [f"ev{run}-train-ok"]
    assert failed.fired() == [f"ev{run}-train-bad"]
    assert views_left == 0
    (event,) = trained.events
    assert event == {
        "job_id": f"ev{run}-train-ok",
        "outcome": "succeeded",
        "completed_at": event["completed_at"],
        "pool_id": shared_pool,
        "terminate_reason": "AllTasksComplete",
        "exit_codes": {"main": 0},
        "tasks": {"succeeded": 1, "failed": 0},
        "metadata": {"app": "train"},
        "batch_account": local_batch_service.account_name,
        "conn_id": "azbatch_default",
    }
    assert failed.events[0]["exit_codes"] == {"main": 3}
    assert failed.events[0]["outcome"] == "failed"


def test_each_job_fires_once_per_watcher_across_a_restart_beside_another_watcher(
    local_batch_service, azbatch_default, batch_client, shared_pool, store
):
    run = uuid.uuid4().hex[:6]
    prefix = f"once{run}-"
    restarted = AzureBatchJobCompletedTrigger(job_id_prefix=prefix, poll_interval=0.5)
    steady = AzureBatchJobCompletedTrigger(job_id_prefix=prefix, pool_id=shared_pool, poll_interval=0.5)
    key = cursor_key(restarted.serialize()[1])

    def settled(job_id: str) -> bool:
        return key in store.values and job_id in Cursor.from_json(store.values[key]).fired

    async def scenario() -> tuple[list[str], list[str], int]:
        first, second = Running(restarted), Running(steady)
        view = account_view.account_view("azbatch_default")
        await wait_until_async(lambda: key in store.values, what="the restarted watcher's first cursor")
        one = _job(batch_client, f"{prefix}1", shared_pool)
        await wait_until_async(lambda: first.fired() == [one] and second.fired() == [one], what="job 1 fired by both")
        await wait_until_async(lambda: settled(one), what="job 1 saved as fired", timeout=30)
        await first.stop()
        # While it is stopped, a job completes; the other watcher keeps the account's view open.
        two = _job(batch_client, f"{prefix}2", shared_pool)
        await wait_until_async(lambda: second.fired() == [one, two], what="job 2 fired by the steady watcher")
        local_batch_service.reset_request_counts()
        first.start()
        await wait_until_async(lambda: first.fired() == [one, two], what="job 2 fired by the restarted watcher")
        three = _job(batch_client, f"{prefix}3", shared_pool)
        both = [one, two, three]
        await wait_until_async(lambda: first.fired() == both and second.fired() == both, what="job 3")
        looks = view.looks
        await wait_until_async(lambda: view.looks >= looks + 3, what="three more looks")
        await first.stop()
        await second.stop()
        return first.fired(), second.fired(), local_batch_service.request_counts().get("Tasks_ListTasks", 0)

    first_fired, second_fired, task_lists = asyncio.run(scenario())
    assert first_fired == [f"{prefix}1", f"{prefix}2", f"{prefix}3"]
    assert second_fired == [f"{prefix}1", f"{prefix}2", f"{prefix}3"]
    # Since the restart: the restarted watcher listed the tasks of jobs 2 and 3, the steady one of job 3.
    assert task_lists == 3


def test_a_new_watcher_fires_no_earlier_job_and_one_stopped_before_its_event_settled_fires_it_again(
    local_batch_service, azbatch_default, batch_client, shared_pool, store
):
    run = uuid.uuid4().hex[:6]
    prefix = f"settle{run}-"
    trigger = AzureBatchJobCompletedTrigger(job_id_prefix=prefix, poll_interval=0.5)
    key = cursor_key(trigger.serialize()[1])
    earlier = _job(batch_client, f"{prefix}earlier", shared_pool)
    wait_until(_completed(batch_client, earlier), what="the earlier job completed")

    async def scenario() -> tuple[list[str], dict[str, str], list[str]]:
        watcher = Running(trigger)
        await wait_until_async(lambda: key in store.values, what="the watcher's first cursor")
        job = _job(batch_client, f"{prefix}1", shared_pool)
        await wait_until_async(lambda: watcher.fired() == [job], what="the job fired")
        # Stopped at once: its event may not have reached Airflow's database, so it is not saved as fired.
        await watcher.stop()
        saved = Cursor.from_json(store.values[key]).fired
        first = watcher.fired()
        watcher.start()
        view = account_view.account_view("azbatch_default")  # the first closed with its only listener
        await wait_until_async(lambda: watcher.fired() == [job, job], what="the job fired again after the restart")
        looks = view.looks
        await wait_until_async(lambda: view.looks >= looks + 3, what="three more looks")
        await watcher.stop()
        return first, saved, watcher.fired()

    first, saved, fired = asyncio.run(scenario())
    assert first == [f"{prefix}1"]
    assert saved == {}
    assert fired == [f"{prefix}1", f"{prefix}1"]
