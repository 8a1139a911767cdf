"""Job preparation and release tasks: once per node before the job's first task there, and when the job ends.

A preparation task is retried up to its ``constraints.maxTaskRetryCount`` on a nonzero exit (as tasks are);
its resource files are downloaded into its working directory first (a download that fails is a failure
without an exit code, not retried, as for tasks); its status record carries what the REST reference's
``JobPreparationTaskExecutionInformation`` does: state, times, task root directory, exit code, result,
failure information, retry count and last retry time. A release task runs once per node that ran the
preparation task, and is not retried (the service has no retry count for it).
"""

from __future__ import annotations

import asyncio
from typing import Any

from local_azure_batch.lang.times import UNLIMITED_TEXT, parse_duration
from local_azure_batch.runner.process import ProcessOutcome, RunHandle
from local_azure_batch.runner.transfers import TransferError

from .account import Account
from .clock import iso, utcnow
from .jobs import Job
from .node_commands import node_process
from .pools import ComputeNode
from .tasks import FAILURE_EXIT_CODE, WALL_CLOCK_EXCEEDED, container_preamble, launch_failure


class JobSideTasks:
    def __init__(self, account: Account) -> None:
        self.account = account

    async def prepare_node(self, job: Job, node: ComputeNode) -> bool:
        """Run the job's preparation task on ``node`` unless it ran there; whether the job's tasks may run there."""
        prep = job.spec.get("jobPreparationTask")
        if prep is None:
            return True
        record = job.preparation.get(node.id)
        while record is not None and record.get("state") == "running":
            await asyncio.sleep(self.account.settings.tick_seconds / 2)
            record = job.preparation.get(node.id)
        if record is not None:
            return record.get("result") == "success" or not prep.get("waitForSuccess", True)
        record = {
            "state": "running",
            "startTime": iso(utcnow()),
            "retryCount": 0,
            "taskRootDirectory": node.dirs.relative(node.dirs.task_dir(job.id, prep["id"])),
        }
        job.preparation[node.id] = record
        retries = int(prep.get("constraints", {}).get("maxTaskRetryCount", 0))
        while True:
            outcome, failure = await self._run(job, node, prep)
            retryable = failure is None and outcome is not None and outcome.exit_code not in (0, None)
            if not retryable or (retries != -1 and record["retryCount"] >= retries):
                break
            record["retryCount"] += 1
            record["lastRetryTime"] = iso(utcnow())
        _completed(record, outcome, failure)
        return record["result"] == "success" or not prep.get("waitForSuccess", True)

    async def release(self, job: Job) -> None:
        """The job's release task on every node that ran its preparation task."""
        release = job.spec.get("jobReleaseTask")
        pool = self.account.pool_of(job)
        if release is None or pool is None:
            return
        for node_id in list(job.preparation):
            node = pool.nodes.get(node_id)
            if node is None:
                continue
            record: dict[str, Any] = {
                "state": "running",
                "startTime": iso(utcnow()),
                "taskRootDirectory": node.dirs.relative(node.dirs.task_dir(job.id, release["id"])),
            }
            job.release[node_id] = record
            _completed(record, *(await self._run(job, node, release)))

    async def _run(
        self, job: Job, node: ComputeNode, side: dict[str, Any]
    ) -> tuple[ProcessOutcome | None, dict[str, Any] | None]:
        """One run of the side task: (how its process ended, or the failure that kept it from starting)."""
        task_dir = node.dirs.task_dir(job.id, side["id"])
        (task_dir / "wd").mkdir(parents=True, exist_ok=True)
        try:
            await self.account.transfers.download_resource_files(side.get("resourceFiles") or [], task_dir / "wd")
        except TransferError as exc:
            return None, exc.failure_info
        settings = list(job.spec.get("commonEnvironmentSettings") or []) + list(side.get("environmentSettings") or [])
        wall = side.get("maxWallClockTime") or side.get("constraints", {}).get("maxWallClockTime")
        seconds = parse_duration(wall).total_seconds() if wall and wall != UNLIMITED_TEXT else None
        spec = node_process(
            self.account,
            node,
            job_id=job.id,
            task_id=side["id"],
            task_dir=task_dir,
            command_line=side["commandLine"],
            settings=settings,
            wall_clock_seconds=seconds,
            identity=side,
            stderr_preamble=container_preamble(side.get("containerSettings")),
        )
        return await self.account.runner.run(spec, RunHandle()), None


def _completed(record: dict[str, Any], outcome: ProcessOutcome | None, failure: dict[str, Any] | None) -> None:
    record.update(state="completed", endTime=iso(outcome.end_time if outcome is not None else utcnow()))
    for name in ("exitCode", "failureInfo"):
        record.pop(name, None)
    if outcome is not None and outcome.exit_code is not None:
        record["exitCode"] = outcome.exit_code
    if failure is None and outcome is not None:
        if outcome.ended_by == "launch_failed":  # the program could not be started: no exit code
            failure = launch_failure(outcome.error or "")
        elif outcome.ended_by == "wall_clock":
            failure = WALL_CLOCK_EXCEEDED
        elif outcome.exit_code != 0:
            failure = FAILURE_EXIT_CODE
    record["result"] = "failure" if failure is not None else "success"
    if failure is not None:
        record["failureInfo"] = dict(failure)
