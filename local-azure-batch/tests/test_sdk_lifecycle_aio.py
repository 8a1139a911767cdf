"""The unmodified azure-batch 15.x aio client drives the same life cycle."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from azure.batch import models as m
from azure.batch.aio import BatchClient as AsyncBatchClient
from azure.batch.models._models import BatchJobTerminateOptions
from azure.core.credentials import AzureNamedKeyCredential
from azure.core.exceptions import ResourceNotFoundError

from tests import sdk_models
from tests.helpers import sh


async def _poll(check, timeout=30.0, what="condition"):
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = await check()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)


def test_aio_client_full_life_cycle(local_batch_service):
    async def scenario():
        credential = AzureNamedKeyCredential(local_batch_service.account_name, local_batch_service.account_key)
        async with AsyncBatchClient(local_batch_service.url, credential) as client:
            pool_id, job_id = f"apool-{uuid.uuid4().hex[:6]}", f"ajob-{uuid.uuid4().hex[:6]}"
            await client.create_pool(sdk_models.pool(pool_id, nodes=2, slots=4))

            async def nodes_idle():
                nodes = [node async for node in client.list_nodes(pool_id)]
                return len(nodes) == 2 and all(node.state == m.BatchNodeState.IDLE for node in nodes)

            await _poll(nodes_idle, what="idle nodes")
            await client.create_job(m.BatchJobCreateOptions(id=job_id, pool_info=m.BatchPoolInfo(pool_id=pool_id)))
            await client.create_task(
                job_id,
                m.BatchTaskCreateOptions(
                    id="grower", command_line=sh("for i in 1 2 3 4 5 6; do echo row $i; sleep 0.1; done")
                ),
            )
            result = await client.create_tasks(
                job_id, [m.BatchTaskCreateOptions(id=f"t{i}", command_line=f"echo {i}") for i in range(250)]
            )
            assert len(result.result_values) == 250

            seen = b""
            while True:
                task = await client.get_task(job_id, "grower")
                if task.state == m.BatchTaskState.ACTIVE:
                    await asyncio.sleep(0.05)
                    continue
                props = await client.get_task_file_properties(job_id, "grower", "stdout.txt")
                if props.content_length > len(seen):
                    stream = await client.download_task_file(
                        job_id,
                        "grower",
                        "stdout.txt",
                        ocp_range=f"bytes={len(seen)}-{props.content_length - 1}",
                    )
                    seen += b"".join([chunk async for chunk in stream])
                if task.state == m.BatchTaskState.COMPLETED and props.content_length == len(seen):
                    break
                await asyncio.sleep(0.05)
            assert seen.decode().splitlines() == [f"row {i}" for i in range(1, 7)]

            async def all_done():
                counts = await client.get_job_task_counts(job_id)
                return counts.task_counts.completed == 251 and counts

            counts = await _poll(all_done, what="all tasks")
            assert counts.task_counts.succeeded == 251
            poller = await client.begin_terminate_job(
                job_id, BatchJobTerminateOptions(termination_reason="UserTerminate"), polling_interval=1
            )
            await poller.result()
            assert (await client.get_job(job_id)).state == m.BatchJobState.COMPLETED
            await (await client.begin_delete_job(job_id, polling_interval=1)).result()
            with pytest.raises(ResourceNotFoundError):
                await client.get_job(job_id)
            await (await client.begin_delete_pool(pool_id, polling_interval=1)).result()

    asyncio.run(scenario())
