"""Scheduling tasks onto node slots and running them: preparation, process, uploads, retries, completion."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from local_azure_batch.model.base import ServiceBase
from local_azure_batch.runner.process import (
    ProcessOutcome,
    ProcessSpec,
    RunHandle,
)
from local_azure_batch.runner.transfers import TransferError

from .clock import iso, utcnow
from .durations import parse_duration
from .jobs import (
    ACTIVE_JOB,
    DISABLED,
    Job,
)
from .placement import hosts_multi_instance_tasks, pick_instance_nodes, pick_node
from .pools import (
    POOL_DELETING,
    ComputeNode,
    Pool,
)
from .tasks import (
    ACTIVE,
    COMPLETED,
    COORDINATION_FAILED,
    RUNNING,
    TASK_ENDED,
    WALL_CLOCK_EXCEEDED,
    Task,
    launch_failure,
)

log = logging.getLogger(__name__)

# Failures of the application (or of a multi-instance task's coordination) are retried; others are not.
RETRIED_FAILURES = ("FailureExitCode", COORDINATION_FAILED)


@dataclass
class Execution(ServiceBase):
    # -- scheduling -----------------------------------------------------------------------------------
    async def _scheduler_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                self._schedule()
            except Exception:
                log.exception("scheduler pass failed")

    def _schedule(self) -> None:
        by_pool: dict[str, list[Job]] = {}
        for job in self.jobs.values():
            if job.is_schedulable and job.ready and job.pool_id:
                by_pool.setdefault(job.pool_id.lower(), []).append(job)
        for pool_key, jobs in by_pool.items():
            pool = self.pools.get(pool_key)
            if pool is None or pool.state == POOL_DELETING:
                continue
            nodes = [node for node in pool.nodes.values() if node.usable]
            if not nodes:
                continue
            jobs.sort(key=lambda job: (-int(job.spec.get("priority", 0)), job.creation_time))
            spread = pool.spec["taskSchedulingPolicy"]["nodeFillType"] == "Spread"
            for job in jobs:
                self._schedule_job(job, pool, nodes, spread)

    def _schedule_job(self, job: Job, pool: Pool, nodes: list[ComputeNode], spread: bool) -> None:
        limit = int(job.spec.get("maxParallelTasks", -1))
        never_here: list[Task] = []
        while job.ready:
            task = job.ready[0]
            if task.state != ACTIVE or job.tasks.get(task.key) is not task:
                job.ready.popleft()
                continue
            if limit != -1 and job.running_count() >= limit:
                break
            if task.is_multi_instance:
                if not hosts_multi_instance_tasks(pool):
                    # It stays active for good (as on the service), but must not hold up the job's other tasks.
                    never_here.append(job.ready.popleft())
                    continue
                picked = pick_instance_nodes(nodes, task, job)
                if picked is None:
                    break
                job.ready.popleft()
                self._launch_multi_instance(task, picked)
                continue
            node = pick_node(nodes, task, spread, job)
            if node is None:
                break
            job.ready.popleft()
            self._launch(task, node)
        job.ready.extendleft(reversed(never_here))

    def _launch(self, task: Task, node: ComputeNode) -> None:
        job = task.job
        task.node = node
        task.end_reason = None
        node.add_task(task)
        task.record_node(node, self.base_url)
        task.start_attempt()
        job.change_task_state(task, RUNNING)
        task.handle = RunHandle()
        self._spawn(self._execute(task, node, task.handle))

    async def _execute(self, task: Task, node: ComputeNode, handle: RunHandle) -> None:
        job = task.job
        task_dir = node.dirs.task_dir(job.id, task.id)
        outcome: ProcessOutcome | None = None
        failure: dict[str, Any] | None = None
        try:
            task_dir.mkdir(parents=True, exist_ok=True)
            (task_dir / "wd").mkdir(exist_ok=True)
            if not await self._prepare_node_for_job(job, node):
                task.end_reason = "requeue"
            else:
                failure = self._container_mismatch(task, node)
                if failure is None:
                    try:
                        await self.transfers.download_resource_files(
                            task.spec.get("resourceFiles") or [], task_dir / "wd"
                        )
                    except TransferError as exc:
                        failure = exc.failure_info
                if failure is None and not handle.terminate_requested:
                    spec = self._process_spec(
                        task, node, task_dir, task.spec["commandLine"], wall_clock_seconds=task.wall_clock_seconds
                    )
                    outcome = await self.runner.run(spec, handle)
        except Exception as exc:
            log.exception("task %s/%s could not run", job.id, task.id)
            failure = {"category": "servererror", "code": "InternalError", "message": str(exc)}
        self._finish(task, node, outcome, failure, task_dir)

    def _container_mismatch(self, task: Task, node: ComputeNode) -> dict[str, Any] | None:
        if task.spec.get("containerSettings") and not node.pool.spec["virtualMachineConfiguration"].get(
            "containerConfiguration"
        ):
            return {
                "category": "usererror",
                "code": "ContainerSettingsNotAllowed",
                "message": "The task has containerSettings but its pool has no containerConfiguration.",
            }
        return None

    def _process_spec(
        self,
        task: Task,
        node: ComputeNode,
        task_dir: Path,
        command_line: str,
        *,
        wall_clock_seconds: float | None,
        extra: Mapping[str, str] | None = None,
        append: bool = False,
    ) -> ProcessSpec:
        """One command of the task on ``node``: its own, or a multi-instance task's coordination command."""
        job = task.job
        settings = list(job.spec.get("commonEnvironmentSettings") or []) + list(
            task.spec.get("environmentSettings") or []
        )
        variables: dict[str, str] = {}
        if job.spec.get("jobPreparationTask"):
            prep_dir = node.dirs.task_dir(job.id, job.spec["jobPreparationTask"]["id"])
            variables["AZ_BATCH_JOB_PREP_DIR"] = str(prep_dir)
            variables["AZ_BATCH_JOB_PREP_WORKING_DIR"] = str(prep_dir / "wd")
        variables.update(extra or {})
        preamble = None
        container = task.spec.get("containerSettings")
        if container and not append:
            preamble = (
                f"[local Batch service] containerSettings.imageName={container.get('imageName')!s}: no container "
                "engine is used here; the command runs on the host.\n"
            )
        return self._node_process(
            node,
            job_id=job.id,
            task_id=task.id,
            task_dir=task_dir,
            command_line=command_line,
            settings=settings,
            extra=variables,
            wall_clock_seconds=wall_clock_seconds,
            stderr_preamble=preamble,
            append=append,
        )

    async def _prepare_node_for_job(self, job: Job, node: ComputeNode) -> bool:
        prep = job.spec.get("jobPreparationTask")
        if prep is None:
            return True
        record = job.preparation.get(node.id)
        while record is not None and record.get("state") == "running":
            await asyncio.sleep(self.settings.tick_seconds / 2)
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
        outcome = await self._run_job_side_task(job, node, prep)
        record.update(
            state="completed",
            endTime=iso(outcome.end_time),
            exitCode=outcome.exit_code,
            result="success" if outcome.exit_code == 0 else "failure",
        )
        return outcome.exit_code == 0 or not prep.get("waitForSuccess", True)

    async def _run_release_tasks(self, job: Job) -> None:
        release = job.spec.get("jobReleaseTask")
        pool = self.pools.get((job.pool_id or "").lower())
        if release is None or pool is None:
            return
        for node_id in list(job.preparation):
            node = pool.nodes.get(node_id)
            if node is None:
                continue
            record: dict[str, Any] = {"state": "running", "startTime": iso(utcnow())}
            job.release[node_id] = record
            outcome = await self._run_job_side_task(job, node, release)
            record.update(
                state="completed",
                endTime=iso(outcome.end_time),
                exitCode=outcome.exit_code,
                result="success" if outcome.exit_code == 0 else "failure",
            )

    async def _run_job_side_task(self, job: Job, node: ComputeNode, side: dict[str, Any]) -> ProcessOutcome:
        task_dir = node.dirs.task_dir(job.id, side["id"])
        settings = list(job.spec.get("commonEnvironmentSettings") or []) + list(side.get("environmentSettings") or [])
        wall = side.get("maxWallClockTime") or side.get("constraints", {}).get("maxWallClockTime")
        seconds = parse_duration(wall).total_seconds() if wall and not wall.startswith("P10675199D") else None
        spec = self._node_process(
            node,
            job_id=job.id,
            task_id=side["id"],
            task_dir=task_dir,
            command_line=side["commandLine"],
            settings=settings,
            wall_clock_seconds=seconds,
        )
        return await self.runner.run(spec, RunHandle())

    def _finish(
        self,
        task: Task,
        node: ComputeNode,
        outcome: ProcessOutcome | None,
        failure: dict[str, Any] | None,
        task_dir: Path,
    ) -> None:
        job = task.job
        task.handle = None
        reason = task.end_reason
        task.end_reason = None
        if job.tasks.get(task.key) is not task:  # deleted while it ran
            node.remove_task(task)
            self.kick()
            return
        if reason == "requeue":
            node.remove_task(task)
            task.execution["requeueCount"] = task.execution.get("requeueCount", 0) + 1
            task.execution["lastRequeueTime"] = iso(utcnow())
            task.execution.pop("startTime", None)
            job.change_task_state(task, ACTIVE)
            job.ready.appendleft(task)
            self.kick()
            return
        exit_code = outcome.exit_code if outcome is not None else None
        if failure is None and outcome is not None:
            if reason in ("terminate", "job_terminated", "deleted") or outcome.ended_by == "terminated":
                failure = TASK_ENDED
            elif outcome.ended_by == "wall_clock":
                failure = WALL_CLOCK_EXCEEDED
            elif outcome.ended_by == "launch_failed":
                failure = launch_failure(outcome.error or "")
        elif failure is None:
            failure = TASK_ENDED
        task.finish_attempt(exit_code, failure)
        self._spawn(self._after_attempt(task, node, task_dir, outcome, reason))

    async def _after_attempt(
        self,
        task: Task,
        node: ComputeNode,
        task_dir: Path,
        outcome: ProcessOutcome | None,
        reason: str | None,
    ) -> None:
        # Output files are uploaded before the task is reported completed, as the service does.
        if outcome is not None and task.spec.get("outputFiles"):
            try:
                await self.transfers.upload_output_files(
                    task.spec["outputFiles"], task_dir, succeeded=task.execution.get("result") == "success"
                )
            except TransferError as exc:
                task.execution["result"] = "failure"
                task.execution["failureInfo"] = exc.failure_info
        node.remove_task(task)
        job = task.job
        if job.tasks.get(task.key) is not task:
            self.kick()
            return
        # Only application failures (a nonzero exit) are retried; pre-processing and upload errors are not.
        retryable = (
            task.execution.get("failureInfo", {}).get("code") in RETRIED_FAILURES
            and reason is None
            and job.accepts_tasks
            and (task.max_retries == -1 or task.execution["retryCount"] < task.max_retries)
        )
        if retryable:
            task.execution["retryCount"] += 1
            job.change_task_state(task, ACTIVE)
            job.ready.append(task)
        else:
            self._complete(task)
        self.kick()

    def _complete(self, task: Task) -> None:
        job = task.job
        job.change_task_state(task, COMPLETED)
        self._release_waiting(job)
        if task.execution.get("result") == "failure" and job.state == ACTIVE_JOB:
            action = task.exit_options().get("jobAction", "none")
            if action == "terminate":
                self._begin_terminate(job, "TaskFailed")
            elif action == "disable":
                job.set_state(DISABLED)
        self._check_all_complete(job)
