"""Job preparation and release tasks: once per node before the job's first task there, and when the job ends."""

from __future__ import annotations

import asyncio
from typing import Any

from local_azure_batch.lang.times import UNLIMITED_TEXT, parse_duration
from local_azure_batch.runner.process import ProcessOutcome, RunHandle

from .account import Account
from .clock import iso, utcnow
from .jobs import Job
from .node_commands import node_process
from .pools import ComputeNode
from .tasks import launch_failure


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
        outcome = await self._run(job, node, prep)
        _completed(record, outcome)
        return outcome.exit_code == 0 or not prep.get("waitForSuccess", True)

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
            record: dict[str, Any] = {"state": "running", "startTime": iso(utcnow())}
            job.release[node_id] = record
            _completed(record, await self._run(job, node, release))

    async def _run(self, job: Job, node: ComputeNode, side: dict[str, Any]) -> ProcessOutcome:
        task_dir = node.dirs.task_dir(job.id, side["id"])
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
        )
        return await self.account.runner.run(spec, RunHandle())


def _completed(record: dict[str, Any], outcome: ProcessOutcome) -> None:
    record.update(
        state="completed",
        endTime=iso(outcome.end_time),
        result="success" if outcome.exit_code == 0 else "failure",
    )
    if outcome.exit_code is not None:
        record["exitCode"] = outcome.exit_code
    if outcome.ended_by == "launch_failed":  # the program could not be started: no exit code
        record["failureInfo"] = launch_failure(outcome.error or "")
