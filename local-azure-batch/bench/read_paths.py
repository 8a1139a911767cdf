"""How fast the local Batch service answers the reads a job poller makes, with many jobs and tasks loaded.

    .venv/bin/python local-azure-batch/bench/read_paths.py [--jobs 1000] [--tasks 100] [--seconds 5]
        [--concurrency 4]

It starts the service (``--quiet``), loads ``--jobs`` jobs of ``--tasks`` tasks each on a pool without nodes
(their tasks stay active, as in a queue that waits for nodes) and one small job whose tasks have run (for the
file reads), then sends each read for ``--seconds`` from ``--concurrency`` connections, signed with Shared
Key like the SDK's, each request naming a random job. For each read it prints:

- ``req/s``: answers per second (the client shares the machine, so this is a floor);
- ``latency µs``: mean time from sending to the whole answer, as the client sees it;
- ``server CPU µs``: the service process's CPU time (user + system) per request, which is what the number of
  jobs and tasks must not change.

A poller that polls 1,000 jobs every second needs 1,000 task-count requests per second.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shlex
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from email.utils import formatdate

import aiohttp
from azure.batch import BatchClient
from azure.batch import models as m
from azure.core.credentials import AzureNamedKeyCredential
from yarl import URL

from local_azure_batch.auth.shared_key import sign, string_to_sign
from local_azure_batch.testing import LocalBatchService, run_local_batch_service

API = "api-version=2025-06-01"
FILES_JOB = "files"
UBUNTU = m.VirtualMachineConfiguration(
    image_reference=m.BatchVmImageReference(
        publisher="canonical", offer="0001-com-ubuntu-server-jammy", sku="22_04-lts"
    ),
    node_agent_sku_id="batch.node.ubuntu 22.04",
)


@dataclass(frozen=True)
class Read:
    name: str
    method: str
    # (path, query) of one request; the query is already percent-encoded as the SDK sends it.
    target: Callable[[random.Random], tuple[str, str]]
    headers: tuple[tuple[str, str], ...] = ()


def reads(jobs: int, tasks: int, file_tasks: int) -> list[Read]:
    def job(rng: random.Random) -> str:
        return f"bench-{rng.randrange(jobs)}"

    def file_task(rng: random.Random) -> str:
        return f"/jobs/{FILES_JOB}/tasks/f{rng.randrange(file_tasks)}"

    listed = "$filter=state%20eq%20%27completed%27&$select=id,state"
    return [
        Read("GET taskcounts", "GET", lambda rng: (f"/jobs/{job(rng)}/taskcounts", API)),
        Read("GET job", "GET", lambda rng: (f"/jobs/{job(rng)}", API)),
        Read("GET task", "GET", lambda rng: (f"/jobs/{job(rng)}/tasks/t{rng.randrange(tasks)}", API)),
        Read("GET tasks $filter $select", "GET", lambda rng: (f"/jobs/{job(rng)}/tasks", f"{API}&{listed}")),
        Read("GET task files", "GET", lambda rng: (f"{file_task(rng)}/files", API)),
        Read("HEAD stdout.txt", "HEAD", lambda rng: (f"{file_task(rng)}/files/stdout.txt", API)),
        Read(
            "GET stdout.txt ocp-range",
            "GET",
            lambda rng: (f"{file_task(rng)}/files/stdout.txt", API),
            (("ocp-range", "bytes=0-99"),),
        ),
    ]


def load(service: LocalBatchService, jobs: int, tasks: int, file_tasks: int) -> None:
    client = BatchClient(service.url, AzureNamedKeyCredential(service.account_name, service.account_key))
    pool = m.BatchPoolCreateOptions(id="queue", vm_size="standard_d2s_v3", virtual_machine_configuration=UBUNTU)
    client.create_pool(pool)
    client.create_pool(
        m.BatchPoolCreateOptions(
            id="run",
            vm_size="standard_d2s_v3",
            virtual_machine_configuration=UBUNTU,
            target_dedicated_nodes=1,
            task_slots_per_node=4,
        )
    )
    client.create_job(m.BatchJobCreateOptions(id=FILES_JOB, pool_info=m.BatchPoolInfo(pool_id="run")))
    # A shell loop: Batch runs a command line without a shell, so it invokes one.
    output = "/bin/sh -c " + shlex.quote("i=0; while [ $i -lt 200 ]; do echo line $i of the output; i=$((i+1)); done")
    client.create_tasks(
        FILES_JOB, [m.BatchTaskCreateOptions(id=f"f{i}", command_line=output) for i in range(file_tasks)]
    )

    def add(number: int) -> None:
        job_id = f"bench-{number}"
        client.create_job(m.BatchJobCreateOptions(id=job_id, pool_info=m.BatchPoolInfo(pool_id="queue")))
        for start in range(0, tasks, 100):
            group = [
                m.BatchTaskCreateOptions(id=f"t{i}", command_line="true") for i in range(start, min(tasks, start + 100))
            ]
            client.create_task_collection(job_id, m.BatchTaskGroup(task_values=group))

    started = time.monotonic()
    with ThreadPoolExecutor(4) as pool_threads:
        list(pool_threads.map(add, range(jobs)))
    print(f"loaded {jobs} jobs x {tasks} tasks in {time.monotonic() - started:.1f}s")
    deadline = time.monotonic() + 120
    while client.get_job_task_counts(FILES_JOB).task_counts.completed < file_tasks:
        if time.monotonic() > deadline:
            raise RuntimeError("the file tasks did not complete")
        time.sleep(0.2)
    client.close()


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def measure(service: LocalBatchService, read: Read, seconds: float, concurrency: int) -> dict[str, float]:
    latencies: list[float] = []
    stop = time.monotonic() + seconds

    async def worker(session: aiohttp.ClientSession, seed: int) -> None:
        rng = random.Random(seed)
        while time.monotonic() < stop:
            path, query = read.target(rng)
            headers = {"ocp-date": formatdate(usegmt=True), **dict(read.headers)}
            signature = sign(
                service.account_key, string_to_sign(read.method, path, query, headers, service.account_name)
            )
            headers["Authorization"] = f"SharedKey {service.account_name}:{signature}"
            url = URL(f"{service.url}{path}?{query}", encoded=True)
            began = time.perf_counter()
            async with session.request(read.method, url, headers=headers) as response:
                body = await response.read()
                if response.status != 200:
                    raise RuntimeError(f"{read.name}: {response.status} {body[:500]!r}")
            latencies.append(time.perf_counter() - began)

    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        cpu_before = cpu_seconds(service.process.pid)
        began = time.monotonic()
        await asyncio.gather(*(worker(session, seed) for seed in range(concurrency)))
        elapsed = time.monotonic() - began
        cpu = cpu_seconds(service.process.pid) - cpu_before
    count = len(latencies)
    return {
        "requests": count,
        "per_second": count / elapsed,
        "latency_us": statistics.fmean(latencies) * 1e6,
        "server_cpu_us": cpu / count * 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--file-tasks", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    with run_local_batch_service(extra_args=["--quiet", "--node-start-seconds", "0.2"]) as service:
        load(service, args.jobs, args.tasks, args.file_tasks)
        print(f"{'read':<28}{'req/s':>9}{'latency µs':>12}{'server CPU µs':>15}")
        for read in reads(args.jobs, args.tasks, args.file_tasks):
            result = asyncio.run(measure(service, read, args.seconds, args.concurrency))
            print(
                f"{read.name:<28}{result['per_second']:>9.0f}{result['latency_us']:>12.0f}"
                f"{result['server_cpu_us']:>15.0f}"
            )


if __name__ == "__main__":
    main()
