"""The instances of a multi-instance task: the primary (instance 0) and its subtasks, one per node.

Each instance runs the coordination command on its own node; the subtasks are what
``GET /jobs/{job}/tasks/{task}/subtasksinfo`` lists. As in the service's own example, a subtask's
task root directory is ``workitems/<job>/job-1/<task>/<subtask id>``, beside the files the task
shares on that node (``AZ_BATCH_TASK_SHARED_DIR``, the task directory itself).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from local_azure_batch.runner.process import ProcessOutcome, RunHandle

from .clock import iso, utcnow
from .tasks import COMPLETED, FAILURE_EXIT_CODE, RUNNING, TASK_ENDED, WALL_CLOCK_EXCEEDED, launch_failure

if TYPE_CHECKING:
    from .pools import ComputeNode
    from .tasks import Task


class TaskInstance:
    def __init__(self, task: Task, instance_id: int, node: ComputeNode, base_url: str) -> None:
        self.task = task
        self.id = instance_id
        self.node = node
        # Runs the coordination command; the primary's application command has the task's own handle.
        self.handle = RunHandle()
        self.state = RUNNING
        self.state_time = utcnow()
        self.previous_state: str | None = None
        self.previous_state_time: datetime | None = None
        self.start_time = self.state_time
        self.end_time: datetime | None = None
        self.outcome: ProcessOutcome | None = None
        # Set when this instance's own part failed before its command ran (a common resource file).
        self.failure_info: dict[str, Any] | None = None
        self.node_info = node.task_info(base_url, self.directory)

    @property
    def is_primary(self) -> bool:
        return self.id == 0

    @property
    def shared_dir(self) -> Path:
        return self.node.dirs.task_dir(self.task.job.id, self.task.id)

    @property
    def directory(self) -> Path:
        """Where this instance's stdout.txt, stderr.txt and wd are: the task directory for the primary."""
        return self.shared_dir if self.is_primary else self.shared_dir / str(self.id)

    @property
    def exit_code(self) -> int | None:
        return self.outcome.exit_code if self.outcome is not None else None

    @property
    def succeeded(self) -> bool:
        return self.result == "success"

    @property
    def result(self) -> str | None:
        if self.state != COMPLETED:
            return None
        return "success" if self.failure() is None else "failure"

    def failure(self) -> dict[str, Any] | None:
        """How this instance's coordination command went wrong, in the words of a task's failureInfo."""
        if self.failure_info is not None:
            return self.failure_info
        outcome = self.outcome
        if outcome is None or outcome.ended_by == "terminated":
            return TASK_ENDED
        if outcome.ended_by == "wall_clock":
            return WALL_CLOCK_EXCEEDED
        if outcome.ended_by == "launch_failed":
            return launch_failure(outcome.error or "")
        return None if outcome.exit_code == 0 else FAILURE_EXIT_CODE

    def complete(self) -> None:
        if self.state == COMPLETED:
            return
        self.previous_state, self.previous_state_time = self.state, self.state_time
        self.state = COMPLETED
        self.state_time = self.end_time = utcnow()

    def execution_info(self) -> dict[str, Any]:
        out: dict[str, Any] = {"startTime": iso(self.start_time)}
        if self.end_time is not None:
            out["endTime"] = iso(self.end_time)
        if self.exit_code is not None:
            out["exitCode"] = self.exit_code
        if self.result is not None:
            out["result"] = self.result
            failure = self.failure()
            if failure is not None:
                out["failureInfo"] = dict(failure)
        return out

    def to_wire(self) -> dict[str, Any]:
        """A ``BatchSubtask``."""
        out: dict[str, Any] = {"id": self.id, "nodeInfo": dict(self.node_info), **self.execution_info()}
        out["state"] = self.state
        out["stateTransitionTime"] = iso(self.state_time)
        if self.previous_state is not None and self.previous_state_time is not None:
            out["previousState"] = self.previous_state
            out["previousStateTransitionTime"] = iso(self.previous_state_time)
        return out

    def recent_info(self, base_url: str) -> dict[str, Any]:
        """The node's ``recentTasks`` entry: the task, named with this subtask's id."""
        task = self.task
        execution = {
            "retryCount": task.execution.get("retryCount", 0),
            "requeueCount": task.execution.get("requeueCount", 0),
            **self.execution_info(),
        }
        return {
            "taskUrl": f"{base_url}/jobs/{task.job.id}/tasks/{task.id}",
            "jobId": task.job.id,
            "taskId": task.id,
            "subtaskId": self.id,
            "taskState": self.state,
            "executionInfo": execution,
        }
