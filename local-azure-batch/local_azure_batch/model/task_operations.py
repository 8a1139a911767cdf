"""Task operations: adding (one or a collection), get, list, update, terminate, delete, reactivate, files."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from . import validation as v
from .account import Account
from .clock import iso
from .dependencies import queue, release_waiting
from .errors import BatchServiceError, already_exists, conflict, invalid_property, not_found
from .job_operations import JobOperations
from .jobs import ACTIVE_JOB, COMPLETED_JOB, DISABLED, DISABLING, ENABLING, Job
from .tasks import ACTIVE, COMPLETED, RUNNING, TASK_ENDED, Task, normalize_task

# Documented limits of an add task collection request: at most 100 tasks, and less than 1 MB.
MAX_TASKS_PER_COLLECTION = 100
MAX_COLLECTION_BYTES = 1024 * 1024


class TaskOperations:
    def __init__(self, account: Account, jobs: JobOperations) -> None:
        self.account = account
        self.jobs = jobs

    def add_task(self, job_id: str, body: Any) -> Task:
        job = self._job_for_new_tasks(job_id)
        spec = normalize_task(body, job)
        if spec["id"].lower() in job.tasks:
            raise already_exists("Task")
        return self._register(job, spec)

    def add_task_collection(self, job_id: str, body: Any) -> list[dict[str, Any]]:
        job = self._job_for_new_tasks(job_id)
        values = body.get("value") if isinstance(body, dict) else None
        if not isinstance(values, list) or not values:
            raise invalid_property("value", None, "The task collection must hold at least one task.")
        if len(values) > MAX_TASKS_PER_COLLECTION:
            raise invalid_property(
                "value", len(values), f"A task collection can hold at most {MAX_TASKS_PER_COLLECTION} tasks."
            )
        results = []
        for item in values:
            task_id = item.get("id") if isinstance(item, dict) else None
            try:
                spec = normalize_task(item, job)
                if spec["id"].lower() in job.tasks:
                    raise already_exists("Task")
                task = self._register(job, spec)
            except BatchServiceError as exc:
                result: dict[str, Any] = {
                    "status": "servererror" if exc.status >= 500 else "clienterror",
                    "taskId": task_id,
                    "error": {"code": exc.code, "message": {"lang": "en-US", "value": exc.message}},
                }
                if exc.values:
                    result["error"]["values"] = [{"key": key, "value": value} for key, value in exc.values]
                results.append(result)
            else:
                results.append(
                    {
                        "status": "success",
                        "taskId": task.id,
                        "eTag": task.etag,
                        "lastModified": iso(task.last_modified),
                        "location": f"{self.account.base_url}/jobs/{job.id}/tasks/{task.id}",
                    }
                )
        return results

    def _job_for_new_tasks(self, job_id: str) -> Job:
        job = self.account.job(job_id)
        if job.state == COMPLETED_JOB:
            raise conflict("JobCompleted", "The specified job is already in a completed state.")
        if not job.accepts_tasks:
            raise conflict("JobNotActive", f"The specified job is in the {job.state} state and does not accept tasks.")
        return job

    def _register(self, job: Job, spec: dict[str, Any]) -> Task:
        task = Task(spec, job)
        job.add_task(task)
        queue(job, task)
        # A task added to a job that asked to end when all tasks complete keeps it open.
        self.account.kick()
        return task

    def get_task(self, job_id: str, task_id: str) -> Task:
        return self.account.task(job_id, task_id)

    def list_tasks(self, job_id: str) -> list[Task]:
        return self.account.job(job_id).sorted_tasks()

    def update_task(self, job_id: str, task_id: str, body: Any) -> Task:
        task = self.account.task(job_id, task_id)
        if task.state == COMPLETED:
            raise conflict("TaskCompleted", "The specified task is already completed.")
        constraints = body.get("constraints") if isinstance(body, dict) else None
        if isinstance(constraints, dict):
            merged = {
                **task.spec["constraints"],
                **{k: val for k, val in constraints.items() if val is not None},
            }
            v.duration(merged, "maxWallClockTime", path="constraints.maxWallClockTime")
            v.duration(merged, "retentionTime", path="constraints.retentionTime")
            v.integer(merged, "maxTaskRetryCount", minimum=-1, path="constraints.maxTaskRetryCount")
            task.spec["constraints"] = merged
        task.touch()
        return task

    def terminate_task(self, job_id: str, task_id: str) -> Task:
        task = self.account.task(job_id, task_id)
        if task.state == COMPLETED:
            return task
        task.touch()
        if task.state == RUNNING:
            task.end_reason = "terminate"
            self._end_processes(task)
            return task
        # Never started (or waiting for a retry): it completes without running again.
        task.finish_attempt(None, TASK_ENDED)
        self.jobs.task_completed(task)
        return task

    def delete_task(self, job_id: str, task_id: str) -> None:
        job = self.account.job(job_id)
        task = self.account.task(job_id, task_id)
        if task.state == RUNNING:
            task.end_reason = "deleted"
            self._end_processes(task)
        job.remove_task(task)
        # A multi-instance task's subtask directories go too, as on the service.
        nodes = {instance.node for instance in task.instances} | ({task.node} if task.node is not None else set())
        for node in nodes:
            shutil.rmtree(node.dirs.task_dir(job.id, task.id), ignore_errors=True)
        release_waiting(job)
        self.jobs.check_all_complete(job)

    def _end_processes(self, task: Task) -> None:
        for handle in task.run_handles():
            self.account.spawn(self.account.runner.terminate(handle))

    def reactivate_task(self, job_id: str, task_id: str) -> Task:
        job = self.account.job(job_id)
        task = self.account.task(job_id, task_id)
        if job.state not in (ACTIVE_JOB, DISABLED, DISABLING, ENABLING):
            raise conflict("JobNotActive", f"The specified job is in the {job.state} state.")
        if task.state != COMPLETED or task.execution.get("result") != "failure":
            raise conflict("TaskNotFailed", "Only a task that completed with a failure can be reactivated.")
        job.change_task_state(task, ACTIVE)
        task.reactivate()
        task.touch()
        job.ready.append(task)
        self.account.kick()
        return task

    # -- files ----------------------------------------------------------------------------------------
    def task_directory(self, job_id: str, task_id: str) -> Path:
        task = self.account.task(job_id, task_id)
        node = task.node
        path = task.directory
        # The files go with the node (it left the pool) or with the task (deleted by hand, or its job).
        if node is None or path is None or node.pool.nodes.get(node.id) is not node or not path.is_dir():
            raise not_found("File")
        return path

    def node_directory(self, pool_id: str, node_id: str) -> Path:
        return self.account.node(pool_id, node_id).dirs.root
