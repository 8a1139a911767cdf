"""A job schedule on the service's own clock (no ``--schedule-time-scale``): a 1-minute recurrence makes three jobs
in about three minutes, one at a time, for the sync client and the aio client at once (two schedules, one service).

Three real minutes: the other schedule tests run on a scaled clock; this one shows the scale is not what makes it
work. Most of the time is waiting, so it runs in the parallel part beside the others.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import threading

from azure.batch import BatchClient
from azure.batch import models as m
from azure.batch.aio import BatchClient as AsyncBatchClient
from azure.core.credentials import AzureNamedKeyCredential

from local_azure_batch.testing import LocalBatchService, run_local_batch_service
from tests import sdk_models
from tests.helpers import sh, wait_until

POOL = "real-time"
MINUTE = dt.timedelta(minutes=1)
# Three recurrences a minute apart: the third job is made two minutes after the first and done ~10 s later.
DEADLINE_SECONDS = 260


def _options(schedule_id: str) -> m.BatchJobScheduleCreateOptions:
    return m.BatchJobScheduleCreateOptions(
        id=schedule_id,
        schedule=m.BatchJobScheduleConfiguration(recurrence_interval=MINUTE),
        job_specification=m.BatchJobSpecification(
            pool_info=m.BatchPoolInfo(pool_id=POOL),
            job_manager_task=m.BatchJobManagerTask(id="manager", command_line=sh("sleep 5")),
        ),
    )


def _completed(jobs: list[m.BatchJob]) -> list[m.BatchJob] | None:
    done = sorted((job for job in jobs if job.state == m.BatchJobState.COMPLETED), key=lambda job: job.creation_time)
    return done[:3] if len(done) >= 3 else None


def _three_by_the_sync_client(service: LocalBatchService, found: dict[str, list[m.BatchJob]]) -> None:
    with BatchClient(service.url, AzureNamedKeyCredential(service.account_name, service.account_key)) as client:
        client.create_job_schedule(_options("sync-minute"))
        found["sync"] = wait_until(
            lambda: _completed(list(client.list_jobs_from_schedule("sync-minute"))),
            timeout=DEADLINE_SECONDS,
            interval=2.0,
            what="three completed jobs of the sync client's schedule",
        )


async def _three_by_the_aio_client(service: LocalBatchService) -> list[m.BatchJob]:
    credential = AzureNamedKeyCredential(service.account_name, service.account_key)
    async with AsyncBatchClient(service.url, credential) as client:
        await client.create_job_schedule(_options("aio-minute"))
        deadline = asyncio.get_running_loop().time() + DEADLINE_SECONDS
        while asyncio.get_running_loop().time() < deadline:
            done = _completed([job async for job in client.list_jobs_from_schedule("aio-minute")])
            if done:
                return done
            await asyncio.sleep(2.0)
    raise AssertionError("timed out waiting for three completed jobs of the aio client's schedule")


def _assert_three_one_at_a_time(schedule_id: str, jobs: list[m.BatchJob]) -> None:
    assert [job.id for job in jobs] == [f"{schedule_id}:job-{n}" for n in (1, 2, 3)]
    for earlier, later in itertools.pairwise(jobs):
        assert earlier.execution_info.end_time <= later.creation_time
        # A minute apart, on the service's clock: neither scaled nor late.
        gap = (later.creation_time - earlier.creation_time).total_seconds()
        assert 55 <= gap <= 70, f"{later.id} was made {gap:.1f} s after {earlier.id}"
    assert all(job.execution_info.termination_reason == "JMComplete" for job in jobs)


def test_a_one_minute_schedule_makes_three_jobs_in_about_three_minutes_for_both_clients() -> None:
    with run_local_batch_service() as service:
        with BatchClient(service.url, AzureNamedKeyCredential(service.account_name, service.account_key)) as client:
            client.create_pool(sdk_models.pool(POOL, nodes=2))
            wait_until(
                lambda: sum(1 for node in client.list_nodes(POOL) if node.state == m.BatchNodeState.IDLE) == 2,
                what="the pool's nodes",
            )
        found: dict[str, list[m.BatchJob]] = {}
        sync_side = threading.Thread(target=_three_by_the_sync_client, args=(service, found))
        sync_side.start()
        aio_jobs = asyncio.run(_three_by_the_aio_client(service))
        sync_side.join(timeout=DEADLINE_SECONDS + 30)
        assert "sync" in found, "the sync client's schedule did not make three completed jobs in time"
        _assert_three_one_at_a_time("sync-minute", found["sync"])
        _assert_three_one_at_a_time("aio-minute", aio_jobs)
