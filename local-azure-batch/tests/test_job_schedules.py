"""Job schedules through the unmodified SDK (sync client): the operations, their errors, and the jobs the
schedule makes, one at a time.

The service runs with ``--schedule-time-scale 60``: a 1-minute recurrence comes every second, so "three jobs in
about three minutes" takes about three seconds here.
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
from azure.batch import BatchClient
from azure.batch import models as m
from azure.core.credentials import AzureNamedKeyCredential
from azure.core.exceptions import HttpResponseError, ResourceExistsError, ResourceNotFoundError

from local_azure_batch.testing import LocalBatchService, run_local_batch_service
from tests import sdk_models
from tests.helpers import sh, wait_until

SCALE = 60
POOL = "schedules"
MINUTE = dt.timedelta(minutes=1)


def _client(service: LocalBatchService) -> BatchClient:
    return BatchClient(service.url, AzureNamedKeyCredential(service.account_name, service.account_key))


def _service_args(state_dir: Path | None = None) -> list[str]:
    return ["--schedule-time-scale", str(SCALE), *(["--state-dir", str(state_dir)] if state_dir else [])]


def _ready_pool(batch: BatchClient) -> None:
    batch.create_pool(sdk_models.pool(POOL, nodes=2))
    wait_until(
        lambda: sum(1 for node in batch.list_nodes(POOL) if node.state == m.BatchNodeState.IDLE) == 2,
        what="the pool's nodes",
    )


@pytest.fixture(scope="module")
def client() -> Iterator[BatchClient]:
    with run_local_batch_service(extra_args=_service_args()) as service:
        batch = _client(service)
        _ready_pool(batch)
        yield batch
        batch.close()


def manager_spec(command: str = "sleep 1.4") -> m.BatchJobSpecification:
    return m.BatchJobSpecification(
        pool_info=m.BatchPoolInfo(pool_id=POOL),
        job_manager_task=m.BatchJobManagerTask(id="manager", command_line=sh(command)),
    )


def create(client: BatchClient, schedule_id: str, interval: dt.timedelta | None = MINUTE, **timing) -> None:
    client.create_job_schedule(
        m.BatchJobScheduleCreateOptions(
            id=schedule_id,
            schedule=m.BatchJobScheduleConfiguration(recurrence_interval=interval, **timing),
            job_specification=manager_spec(),
        )
    )


def jobs_of(client: BatchClient, schedule_id: str) -> list[m.BatchJob]:
    return sorted(client.list_jobs_from_schedule(schedule_id), key=lambda job: job.creation_time)


def test_three_recurrences_run_three_jobs_one_at_a_time(client: BatchClient) -> None:
    create(client, "every-minute")

    def three_completed() -> list[m.BatchJob] | None:
        done = [job for job in jobs_of(client, "every-minute") if job.state == m.BatchJobState.COMPLETED]
        return done[:3] if len(done) >= 3 else None

    started = dt.datetime.now(dt.timezone.utc)
    completed = wait_until(three_completed, timeout=30, what="three completed jobs")
    # About three (scaled) minutes: each job's manager runs 1.4 s, past the next interval's start.
    assert (dt.datetime.now(dt.timezone.utc) - started) < dt.timedelta(seconds=15)
    assert [job.id for job in completed] == [f"every-minute:job-{n}" for n in (1, 2, 3)]
    for earlier, later in itertools.pairwise(completed):
        # One at a time: a job is made only once the one before it has ended.
        assert earlier.execution_info.end_time <= later.creation_time
    for job in completed:
        assert job.execution_info.termination_reason == "JMComplete"
        manager = client.get_task(job.id, "manager")
        assert manager.execution_info.exit_code == 0
    schedule = client.get_job_schedule("every-minute")
    assert schedule.state == m.BatchJobScheduleState.ACTIVE
    assert schedule.execution_info.recent_job.id.startswith("every-minute:job-")
    assert schedule.execution_info.next_run_time is not None


def test_a_recurrence_below_one_minute_is_refused(client: BatchClient) -> None:
    with pytest.raises(HttpResponseError) as caught:
        create(client, "too-often", interval=dt.timedelta(seconds=30))
    assert caught.value.status_code == 400
    assert caught.value.error.code == "InvalidPropertyValue"
    details = {item.key: item.value for item in caught.value.model.error_values}
    assert details["PropertyName"] == "schedule.recurrenceInterval"
    assert details["Reason"] == "The minimum value is 1 minute."
    with pytest.raises(ResourceNotFoundError):
        client.get_job_schedule("too-often")


def test_errors_are_the_services(client: BatchClient) -> None:
    create(client, "errors", interval=dt.timedelta(days=1))
    with pytest.raises(ResourceExistsError) as exists:
        create(client, "errors", interval=dt.timedelta(days=1))
    assert exists.value.error.code == "JobScheduleExists"
    assert exists.value.model.message.value.startswith("The specified job schedule already exists.")
    with pytest.raises(ResourceNotFoundError) as missing:
        client.get_job_schedule("no-such-schedule")
    assert missing.value.error.code == "JobScheduleNotFound"
    assert missing.value.model.message.value.startswith("The specified job schedule does not exist.")
    with pytest.raises(ResourceNotFoundError):
        list(client.list_jobs_from_schedule("no-such-schedule"))
    assert client.job_schedule_exists("errors") is True
    # HEAD of a schedule that is not there: 404, which azure-batch 15.1's exception policy raises rather than
    # returning False.
    with pytest.raises(ResourceNotFoundError) as head:
        client.job_schedule_exists("no-such-schedule")
    assert head.value.status_code == 404
    client.begin_terminate_job_schedule("errors", polling_interval=0.2).result()
    with pytest.raises(ResourceExistsError) as completed:
        client.disable_job_schedule("errors")
    assert completed.value.error.code == "JobScheduleCompleted"


def test_disabling_stops_the_next_job_and_enabling_resumes(client: BatchClient) -> None:
    create(client, "pausing")
    wait_until(lambda: jobs_of(client, "pausing"), what="the first job")
    client.disable_job_schedule("pausing")
    assert client.get_job_schedule("pausing").state == m.BatchJobScheduleState.DISABLED
    # Several intervals (a second each) pass: the running job ends, and no next one is made.
    wait_until(
        lambda: all(job.state == m.BatchJobState.COMPLETED for job in jobs_of(client, "pausing")),
        what="the first job to end",
    )
    made = len(jobs_of(client, "pausing"))
    deadline = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=3)
    wait_until(lambda: dt.datetime.now(dt.timezone.utc) > deadline, timeout=5, what="three intervals")
    assert len(jobs_of(client, "pausing")) == made
    client.enable_job_schedule("pausing")
    wait_until(lambda: len(jobs_of(client, "pausing")) > made, what="a job after enabling")


def test_terminate_ends_the_schedule_and_its_job(client: BatchClient) -> None:
    create(client, "ending")
    job = wait_until(lambda: jobs_of(client, "ending"), what="the first job")[0]
    client.begin_terminate_job_schedule("ending", polling_interval=0.2).result()
    schedule = client.get_job_schedule("ending")
    assert schedule.state == m.BatchJobScheduleState.COMPLETED
    assert schedule.execution_info.end_time is not None
    assert schedule.execution_info.next_run_time is None
    ended = client.get_job(job.id)
    assert ended.state == m.BatchJobState.COMPLETED
    assert ended.execution_info.termination_reason == "UserTerminate"
    with pytest.raises(ResourceExistsError) as again:
        client.update_job_schedule("ending", m.BatchJobScheduleUpdateOptions(metadata=[]))
    assert again.value.error.code == "JobScheduleCompleted"


def test_delete_removes_the_schedule_and_its_jobs(client: BatchClient) -> None:
    create(client, "going", interval=dt.timedelta(days=1))
    job_id = wait_until(lambda: jobs_of(client, "going"), what="its job")[0].id
    client.begin_delete_job_schedule("going", polling_interval=0.2).result()
    with pytest.raises(ResourceNotFoundError) as gone:
        client.get_job_schedule("going")
    assert gone.value.error.code == "JobScheduleNotFound"
    with pytest.raises(ResourceNotFoundError):
        client.get_job(job_id)


def test_no_job_before_do_not_run_until_and_one_without_recurrence(client: BatchClient) -> None:
    later = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=2)
    create(client, "once", interval=None, do_not_run_until=later)
    schedule = client.get_job_schedule("once")
    assert schedule.execution_info.next_run_time == later
    assert jobs_of(client, "once") == []
    completed = wait_until(
        lambda: client.get_job_schedule("once").state == m.BatchJobScheduleState.COMPLETED, what="the one job"
    )
    assert completed
    jobs = jobs_of(client, "once")
    assert [job.id for job in jobs] == ["once:job-1"]
    assert jobs[0].creation_time >= later


def test_a_restart_keeps_the_schedule(tmp_path: Path) -> None:
    with run_local_batch_service(extra_args=_service_args(tmp_path)) as service:
        client = _client(service)
        _ready_pool(client)
        create(client, "lasting")
        wait_until(lambda: jobs_of(client, "lasting"), what="its first job")
        client.disable_job_schedule("lasting")
        before = client.get_job_schedule("lasting")
        made = [job.id for job in jobs_of(client, "lasting")]
        client.close()
    with run_local_batch_service(extra_args=_service_args(tmp_path)) as again:
        restarted = _client(again)
        after = restarted.get_job_schedule("lasting")
        assert after.state == m.BatchJobScheduleState.DISABLED
        assert after.etag == before.etag
        assert after.schedule.recurrence_interval == MINUTE
        assert [job.id for job in jobs_of(restarted, "lasting")] == made
        restarted.enable_job_schedule("lasting")
        # The next job's id follows on from the ones made before the restart.
        wait_until(
            lambda: f"lasting:job-{len(made) + 1}" in {job.id for job in jobs_of(restarted, "lasting")},
            what="the next job after the restart",
        )
        restarted.close()


def test_the_aio_client_runs_a_schedule_too(client: BatchClient) -> None:
    import asyncio

    from azure.batch.aio import BatchClient as AsyncBatchClient

    endpoint = client._config.endpoint  # the module's service
    credential = client._config.credential

    async def scenario() -> list[m.BatchJob]:
        async with AsyncBatchClient(endpoint, credential) as aio:
            await aio.create_job_schedule(
                m.BatchJobScheduleCreateOptions(
                    id="async-minute",
                    schedule=m.BatchJobScheduleConfiguration(recurrence_interval=MINUTE),
                    job_specification=manager_spec("sleep 0.2"),
                )
            )
            while True:  # bounded by the wait_for below
                jobs = [job async for job in aio.list_jobs_from_schedule("async-minute")]
                done = [job for job in jobs if job.state == m.BatchJobState.COMPLETED]
                if len(done) >= 3:
                    break
                await asyncio.sleep(0.2)
            await (await aio.begin_terminate_job_schedule("async-minute", polling_interval=0.2)).result()
            assert (await aio.get_job_schedule("async-minute")).state == m.BatchJobScheduleState.COMPLETED
            return sorted(done, key=lambda job: job.creation_time)[:3]

    done = asyncio.run(asyncio.wait_for(scenario(), timeout=30))
    assert [job.id for job in done] == [f"async-minute:job-{n}" for n in (1, 2, 3)]
    for earlier, later in itertools.pairwise(done):
        assert earlier.execution_info.end_time <= later.creation_time
