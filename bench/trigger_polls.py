"""How many job polls per second one triggerer process sustains, against the local Batch service.

    python bench/trigger_polls.py [--jobs 200] [--tasks 50] [--seconds 10] [--mode shared|per-trigger|official]

- ``shared``: our trigger's poll (``awatch_step``: one task-counts request when idle) with one
  ``azure.batch.aio`` client shared by all triggers, as ``AzureBatchJobTrigger`` does.
- ``per-trigger``: the same poll, but every trigger opens its own aio client.
- ``official``: what the official provider's trigger does per poll: the sync client in
  ``asyncio.to_thread``, listing every task of the job.

The jobs sit on a pool without nodes, so every poll is an idle one. The local service shares the
machine, so absolute numbers are lower than against Azure; compare modes with each other.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import time

from azure.batch import BatchClient
from azure.batch import models as m
from azure.batch.aio import BatchClient as AsyncBatchClient
from azure.core.credentials import AzureNamedKeyCredential

from airflow_provider_azbatch.hooks.async_clients import shared_client
from airflow_provider_azbatch.utils.job_watch import JobWatcher, WatchState, awatch_step
from local_azure_batch.testing import run_local_batch_service


def setup(service, jobs: int, tasks: int) -> list[str]:
    client = BatchClient(service.url, AzureNamedKeyCredential(service.account_name, service.account_key))
    client.create_pool(
        m.BatchPoolCreateOptions(
            id="idle",
            vm_size="standard_d2s_v3",
            virtual_machine_configuration=m.VirtualMachineConfiguration(
                image_reference=m.BatchVmImageReference(
                    publisher="canonical", offer="0001-com-ubuntu-server-jammy", sku="22_04-lts"
                ),
                node_agent_sku_id="batch.node.ubuntu 22.04",
            ),
            target_dedicated_nodes=0,
        )
    )
    ids = []
    for number in range(jobs):
        job_id = f"bench-{number}"
        client.create_job(m.BatchJobCreateOptions(id=job_id, pool_info=m.BatchPoolInfo(pool_id="idle")))
        client.create_tasks(job_id, [m.BatchTaskCreateOptions(id=f"t{i}", command_line="true") for i in range(tasks)])
        ids.append(job_id)
    client.close()
    return ids


async def run(service, job_ids: list[str], seconds: float, mode: str) -> int:
    polls = 0
    stop = 0.0
    credential = AzureNamedKeyCredential(service.account_name, service.account_key)

    async def ours(client, job_id: str) -> None:
        nonlocal polls
        watcher = JobWatcher(WatchState(job_id=job_id, streamed=["t0"]))
        while time.monotonic() < stop:
            await awatch_step(client, watcher, lambda line: None, max_bytes=1 << 20)
            polls += 1

    async def per_trigger(job_id: str) -> None:
        async with AsyncBatchClient(service.url, credential) as client:
            await ours(client, job_id)

    async def official(client, job_id: str) -> None:
        nonlocal polls
        while time.monotonic() < stop:
            await asyncio.to_thread(lambda: list(client.list_tasks(job_id)))
            polls += 1

    if mode == "shared":
        async with shared_client("bench") as client:  # (its first use imports Airflow: not timed)
            stop = time.monotonic() + seconds
            await asyncio.gather(*(ours(client, job_id) for job_id in job_ids))
    elif mode == "per-trigger":
        stop = time.monotonic() + seconds
        await asyncio.gather(*(per_trigger(job_id) for job_id in job_ids))
    else:
        client = BatchClient(service.url, credential)
        stop = time.monotonic() + seconds
        await asyncio.gather(*(official(client, job_id) for job_id in job_ids))
    return polls


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--tasks", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--mode", choices=["shared", "per-trigger", "official"], default="shared")
    args = parser.parse_args()
    with run_local_batch_service(extra_args=["--quiet"]) as service:
        os.environ["AIRFLOW_CONN_BENCH"] = json.dumps(
            {
                "conn_type": "azbatch",
                "login": service.account_name,
                "password": service.account_key,
                "extra": {"account_url": service.url},
            }
        )
        job_ids = setup(service, args.jobs, args.tasks)
        polls = asyncio.run(run(service, job_ids, args.seconds, args.mode))
    print(
        json.dumps(
            {
                "mode": args.mode,
                "jobs": args.jobs,
                "tasks_per_job": args.tasks,
                "seconds": args.seconds,
                "polls": polls,
                "polls_per_second": round(polls / args.seconds, 1),
                # peak memory of this (triggerer-like) process
                "max_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
