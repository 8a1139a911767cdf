"""Running a task on a node: preparation, resource files, the process, output files, retries, completion."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from local_azure_batch.lang.image_reference import reference_problem
from local_azure_batch.runner.process import ProcessOutcome, ProcessSpec, RunHandle
from local_azure_batch.runner.transfers import TransferError

from .account import Account
from .identity import username
from .job_operations import JobOperations
from .job_side_tasks import JobSideTasks
from .node_commands import node_process
from .node_faults import NODE_FAILED
from .pool_config import user_names
from .pools import ComputeNode
from .tasks import (
    ACTIVE,
    COORDINATION_FAILED,
    RUNNING,
    TASK_ENDED,
    WALL_CLOCK_EXCEEDED,
    Task,
    container_preamble,
    image_pull_failure,
    launch_failure,
)

log = logging.getLogger(__name__)

# Failures of the application (or of a multi-instance task's coordination) are retried; others are not.
RETRIED_FAILURES = ("FailureExitCode", COORDINATION_FAILED)


def internal_error(exc: Exception) -> dict[str, Any]:
    return {"category": "servererror", "code": "InternalError", "message": str(exc)}


class Execution:
    def __init__(self, account: Account, jobs: JobOperations, side_tasks: JobSideTasks) -> None:
        self.account = account
        self.jobs = jobs
        self.side_tasks = side_tasks

    def launch(self, task: Task, node: ComputeNode) -> None:
        job = task.job
        task.node = node
        task.end_reason = None
        task.record_node(node, self.account.base_url)
        task.start_attempt()
        node.add_task(task)
        job.change_task_state(task, RUNNING)
        task.handle = RunHandle()
        self.account.spawn(self._execute(task, node, task.handle))

    async def _execute(self, task: Task, node: ComputeNode, handle: RunHandle) -> None:
        job = task.job
        task_dir = node.dirs.task_dir(job.id, task.id)
        outcome: ProcessOutcome | None = None
        failure: dict[str, Any] | None = None
        try:
            task_dir.mkdir(parents=True, exist_ok=True)
            (task_dir / "wd").mkdir(exist_ok=True)
            if not await self.side_tasks.prepare_node(job, node):
                task.end_reason = "requeue"
            else:
                failure = self.user_mismatch(task, node) or self.container_mismatch(task, node)
                if failure is None:
                    try:
                        await self.account.transfers.download_resource_files(
                            task.spec.get("resourceFiles") or [], task_dir / "wd"
                        )
                    except TransferError as exc:
                        failure = exc.failure_info
                if failure is None and not handle.terminate_requested:
                    spec = self.process_spec(
                        task, node, task_dir, task.spec["commandLine"], wall_clock_seconds=task.wall_clock_seconds
                    )
                    outcome = await self.account.runner.run(spec, handle)
        except Exception as exc:
            log.exception("task %s/%s could not run", job.id, task.id)
            failure = internal_error(exc)
        self.finish(task, node, outcome, failure, task_dir)

    def user_mismatch(self, task: Task, node: ComputeNode) -> dict[str, Any] | None:
        """A task that runs as a named user the pool does not have cannot start (a descriptive code: the
        service's own is not documented)."""
        user = username(task.spec)
        if user is None or user.lower() in user_names(node.pool.spec):
            return None
        return {
            "category": "usererror",
            "code": "UserAccountNotFound",
            "message": f"The task runs as user {user!r}, which is not one of the pool's userAccounts.",
        }

    def container_mismatch(self, task: Task, node: ComputeNode) -> dict[str, Any] | None:
        container = task.spec.get("containerSettings")
        if not container:
            return None
        if not node.pool.spec["virtualMachineConfiguration"].get("containerConfiguration"):
            return {
                "category": "usererror",
                "code": "ContainerSettingsNotAllowed",
                "message": "The task has containerSettings but its pool has no containerConfiguration.",
            }
        # No image is pulled here, but one a container engine cannot even parse fails as its pull would on
        # a node. A well-formed reference to an image or tag that does not exist cannot be told offline.
        image = str(container.get("imageName", ""))
        problem = reference_problem(image)
        return None if problem is None else image_pull_failure(image, problem)

    def process_spec(
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
        preamble = None if append else container_preamble(task.spec.get("containerSettings"))
        return node_process(
            self.account,
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
            identity=task.spec,
        )

    def finish(
        self,
        task: Task,
        node: ComputeNode,
        outcome: ProcessOutcome | None,
        failure: dict[str, Any] | None,
        task_dir: Path,
    ) -> None:
        """An attempt's process is over: requeue it, or record how it ended and go on to its output files."""
        job = task.job
        task.handle = None
        reason = task.end_reason
        task.end_reason = None
        if job.tasks.get(task.key) is not task:  # deleted while it ran
            node.remove_task(task)
            self.account.kick()
            return
        if reason in ("requeue", "preempted", NODE_FAILED):
            # A preemption or a failed node is no user request: it does not count in requeueCount (Task.requeue).
            task.requeue(counted=reason == "requeue")
            node.remove_task(task)
            job.change_task_state(task, ACTIVE)
            job.ready.appendleft(task)
            self.account.kick()
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
        self.account.spawn(self._after_attempt(task, node, task_dir, outcome, reason))

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
                await self.account.transfers.upload_output_files(
                    task.spec["outputFiles"], task_dir, succeeded=task.execution.get("result") == "success"
                )
            except TransferError as exc:
                task.execution["result"] = "failure"
                task.execution["failureInfo"] = exc.failure_info
        node.remove_task(task)
        job = task.job
        if job.tasks.get(task.key) is not task:
            self.account.kick()
            return
        # Only application failures (a nonzero exit) are retried; pre-processing and upload errors are not.
        retryable = (
            task.execution.get("failureInfo", {}).get("code") in RETRIED_FAILURES
            and reason is None
            and job.accepts_tasks
            and (task.max_retries == -1 or task.execution["retryCount"] < task.max_retries)
        )
        if retryable:
            task.await_retry()
            job.change_task_state(task, ACTIVE)
            job.ready.append(task)
        else:
            self.jobs.task_completed(task)
        self.account.kick()
