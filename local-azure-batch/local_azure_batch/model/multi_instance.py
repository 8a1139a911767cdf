"""Running a multi-instance task on its nodes: coordination everywhere, then the application on the primary.

As on the service (https://learn.microsoft.com/azure/batch/batch-mpi): every instance downloads the
common resource files into the task's shared directory on its node and runs the coordination command;
once that has succeeded on all of them, the primary (instance 0) runs the task's own command line, the
application command, with the task's resource files in its working directory. The application's exit
code is the task's. When it ends, so do the subtasks: whatever the coordination commands left running
is killed. A coordination command that fails ends the others at once and fails the task, which is then
retried like a task whose command failed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from local_azure_batch.runner.environment import multi_instance_environment
from local_azure_batch.runner.process import ProcessOutcome, RunHandle
from local_azure_batch.runner.transfers import TransferError

from .account import Account
from .execution import Execution, internal_error
from .job_side_tasks import JobSideTasks
from .pools import ComputeNode
from .task_instances import TaskInstance
from .tasks import FAILURE_EXIT_CODE, RUNNING, Task, coordination_failure

log = logging.getLogger(__name__)


class MultiInstanceExecution:
    def __init__(self, account: Account, execution: Execution, side_tasks: JobSideTasks) -> None:
        self.account = account
        self.execution = execution
        self.side_tasks = side_tasks

    def launch(self, task: Task, nodes: list[ComputeNode]) -> None:
        primary = nodes[0]
        task.node = primary
        task.end_reason = None
        task.record_node(primary, self.account.base_url)
        task.start_attempt()
        task.instances = [TaskInstance(task, index, node, self.account.base_url) for index, node in enumerate(nodes)]
        for instance in task.instances:
            instance.node.add_task(task, None if instance.is_primary else instance)
        task.job.change_task_state(task, RUNNING)
        task.handle = RunHandle()
        self.account.spawn(self._execute_multi_instance(task, list(task.instances), task.handle))

    async def _execute_multi_instance(self, task: Task, instances: list[TaskInstance], handle: RunHandle) -> None:
        primary = instances[0]
        # The wall clock covers the whole task: coordination and application alike.
        deadline = _deadline(task.wall_clock_seconds)
        outcome: ProcessOutcome | None = None
        failure: dict[str, Any] | None = None
        try:
            for instance in instances:
                (instance.directory / "wd").mkdir(parents=True, exist_ok=True)
            prepared = await asyncio.gather(
                *(self.side_tasks.prepare_node(task.job, instance.node) for instance in instances)
            )
            if not all(prepared):
                task.end_reason = "requeue"
            else:
                failure = self.execution.container_mismatch(task, primary.node) or await self._coordinate(
                    task, instances, deadline
                )
                if failure is None and task.end_reason is None and not handle.terminate_requested:
                    spec = self.execution.process_spec(
                        task,
                        primary.node,
                        primary.directory,
                        task.spec["commandLine"],
                        wall_clock_seconds=_remaining(deadline),
                        extra=self._environment(instances, primary),
                        append=True,
                    )
                    outcome = await self.account.runner.run(spec, handle)
        except Exception as exc:
            log.exception("multi-instance task %s/%s could not run", task.job.id, task.id)
            failure = internal_error(exc)
        self._end_instances(task, instances)
        self.execution.finish(task, primary.node, outcome, failure, primary.directory)

    async def _coordinate(
        self, task: Task, instances: list[TaskInstance], deadline: float | None
    ) -> dict[str, Any] | None:
        """The coordination command on every instance; the first failure ends the others."""
        failures: list[dict[str, Any]] = []

        async def coordinate(instance: TaskInstance) -> None:
            failure = await self._coordinate_instance(task, instance, instances, deadline)
            if failure is not None and not failures:
                failures.append(failure)
                await asyncio.gather(
                    *(self.account.runner.terminate(other.handle) for other in instances if other is not instance)
                )

        await asyncio.gather(*(coordinate(instance) for instance in instances))
        # Instances ended by a terminate, delete or requeue are reported as such by _finish.
        return failures[0] if failures and task.end_reason is None else None

    async def _coordinate_instance(
        self, task: Task, instance: TaskInstance, instances: list[TaskInstance], deadline: float | None
    ) -> dict[str, Any] | None:
        settings = task.spec["multiInstanceSettings"]
        try:
            await self.account.transfers.download_resource_files(
                settings.get("commonResourceFiles") or [], instance.shared_dir
            )
            if instance.is_primary:
                await self.account.transfers.download_resource_files(
                    task.spec.get("resourceFiles") or [], instance.directory / "wd"
                )
        except TransferError as exc:
            instance.failure_info = exc.failure_info
            return exc.failure_info
        except Exception as exc:
            log.exception("multi-instance task %s/%s: instance %d failed", task.job.id, task.id, instance.id)
            instance.failure_info = internal_error(exc)
            return instance.failure_info
        spec = self.execution.process_spec(
            task,
            instance.node,
            instance.directory,
            settings["coordinationCommandLine"],
            wall_clock_seconds=_remaining(deadline),
            extra=self._environment(instances, instance),
        )
        instance.outcome = await self.account.runner.run(spec, instance.handle)
        failure = instance.failure()
        if failure is not None and failure["code"] == FAILURE_EXIT_CODE["code"]:
            return coordination_failure(instance.id, instance.node.id, instance.exit_code)
        return failure

    def _environment(self, instances: list[TaskInstance], instance: TaskInstance) -> dict[str, str]:
        return multi_instance_environment(
            [item.node.ip_address for item in instances],
            instance.id,
            instance.shared_dir,
            primary_last=self.account.settings.host_list_order == "primary-last",
        )

    def _end_instances(self, task: Task, instances: list[TaskInstance]) -> None:
        """The subtasks end with the primary, and free their nodes; the primary's goes with the task."""
        for instance in instances:
            self.account.runner.end_session(instance.handle)
            instance.complete()
            if not instance.is_primary:
                instance.node.remove_task(task, succeeded=instance.succeeded)
        self.account.kick()


def _deadline(seconds: float | None) -> float | None:
    return None if seconds is None else time.monotonic() + seconds


def _remaining(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - time.monotonic())
