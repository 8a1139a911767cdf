"""Job operations and the job life cycle: terminate, delete, disable, auto-pools, and what a task's end does to
its job."""

from __future__ import annotations

import asyncio
import shutil
import uuid
from collections.abc import Callable
from typing import Any

from . import validation as v
from .account import Account
from .dependencies import queue, release_waiting
from .errors import BatchServiceError, active_job_quota_reached, already_exists, conflict, invalid_property
from .job_side_tasks import JobSideTasks
from .jobs import (
    ACTIVE_JOB,
    COMPLETED_JOB,
    DELETING,
    DISABLED,
    DISABLING,
    ENABLING,
    JOB_MANAGER_ONLY,
    TERMINATING,
    Job,
    normalize_job,
    normalize_mutable_job_fields,
    normalize_pool_info,
)
from .pool_operations import PoolOperations
from .pools import POOL_DELETING, Pool, normalize_pool
from .tasks import COMPLETED, RUNNING, Task, normalize_task

_UPDATABLE = (
    "priority",
    "maxParallelTasks",
    "allowTaskPreemption",
    "constraints",
    "onAllTasksComplete",
    "metadata",
    "poolInfo",
    "networkConfiguration",
)


def _being_deleted() -> BatchServiceError:
    return conflict("JobBeingDeleted", "The specified job has been marked for deletion and is being garbage collected.")


def _already_completed() -> BatchServiceError:
    return conflict("JobCompleted", "The specified job is already in a completed state.")


class JobOperations:
    def __init__(self, account: Account, pools: PoolOperations, side_tasks: JobSideTasks) -> None:
        self.account = account
        self.pools = pools
        self.side_tasks = side_tasks
        # Told of each job that completed (job schedules wait for their jobs).
        self.completion_listeners: list[Callable[[Job], None]] = []

    def auto_pool_spec(self, pool: Any, path: str) -> dict[str, Any]:
        settings = self.account.settings
        return normalize_pool(
            pool,
            path,
            require_id=False,
            subscription_id=settings.subscription_id,
            extra_vm_sizes=settings.extra_vm_sizes,
            unavailable_vm_sizes=settings.unavailable_vm_sizes,
            region=settings.location,
        )

    def create_job(self, body: Any) -> Job:
        spec = normalize_job(body, normalize_pool_spec=self.auto_pool_spec)
        existing = self.account.jobs.get(spec["id"].lower())
        if existing is not None:
            if existing.state == DELETING:
                raise _being_deleted()
            raise already_exists("Job")
        quota = self.account.settings.job_quota
        if quota is not None and self.account.active_jobs() >= quota:
            raise active_job_quota_reached()
        return self.add_job(spec)

    def add_job(self, spec: dict[str, Any], schedule_id: str | None = None) -> Job:
        """A job from a checked spec: one a client created, or one a job schedule made (``schedule_id``)."""
        job = Job(spec)
        job.schedule_id = schedule_id
        auto = spec["poolInfo"].get("autoPoolSpecification")
        if auto is not None:
            pool_id = str(uuid.uuid4()).upper()
            if auto.get("autoPoolIdPrefix"):
                pool_id = f"{auto['autoPoolIdPrefix']}_{pool_id}"[:64]
            job.auto_pool = self.pools.add_pool(Pool({**auto["pool"], "id": pool_id}, owner_job=job.id))
        self.account.jobs[job.key] = job
        manager = spec.get("jobManagerTask")
        if manager is not None:
            # Added with the job, as the service does: it is listed among the job's tasks.
            body = {name: value for name, value in manager.items() if name not in JOB_MANAGER_ONLY}
            task = Task(normalize_task(body, job, "jobManagerTask."), job)
            job.add_task(task)
            queue(job, task)
        self.check_all_complete(job)
        self.account.kick()
        return job

    def get_job(self, job_id: str) -> Job:
        return self.account.job(job_id)

    def list_jobs(self) -> list[Job]:
        return sorted(self.account.jobs.values(), key=lambda job: job.key)

    def update_job(self, job_id: str, body: Any, replace: bool) -> Job:
        job = self.account.job(job_id)
        if job.state in (COMPLETED_JOB, TERMINATING):
            raise _already_completed()
        if job.state == DELETING:
            raise _being_deleted()
        if not isinstance(body, dict):
            raise invalid_property("job", body, "The body must be a JSON object.")
        candidate = {name: job.spec[name] for name in _UPDATABLE if name in job.spec and not replace}
        candidate.update({name: body[name] for name in _UPDATABLE if name in body})
        if replace:
            candidate.setdefault("poolInfo", job.spec["poolInfo"])
        normalize_mutable_job_fields(candidate)
        if "poolInfo" in body:
            normalize_pool_info(candidate["poolInfo"], self.auto_pool_spec)
            if job.state != DISABLED and candidate["poolInfo"] != job.spec["poolInfo"]:
                raise conflict("JobNotDisabled", "The pool of a job can only be changed while the job is disabled.")
        for name in _UPDATABLE:
            if name in candidate:
                job.spec[name] = candidate[name]
            elif replace:
                job.spec.pop(name, None)
        if "onTaskFailure" in body:
            v.enum(body, "onTaskFailure", ("noaction", "performexitoptionsjobaction"))
            job.spec["onTaskFailure"] = body["onTaskFailure"]
        job.constraints_changed()
        job.touch()
        self.check_all_complete(job)
        self.account.kick()
        return job

    def terminate_job(self, job_id: str, reason: str | None) -> Job:
        job = self.account.job(job_id)
        if job.state == COMPLETED_JOB:
            raise _already_completed()
        if job.state == DELETING:
            raise _being_deleted()
        if job.state != TERMINATING:
            job.touch()
            self.begin_terminate(job, reason or "UserTerminate")
        return job

    def begin_terminate(self, job: Job, reason: str) -> None:
        job.set_state(TERMINATING)
        job.execution["terminateReason"] = reason
        self.account.spawn(self._terminate(job))

    async def _terminate(self, job: Job) -> None:
        await self.stop_running_tasks(job, "job_terminated")
        await self.side_tasks.release(job)
        if job.state == TERMINATING:
            job.complete()
            for listener in self.completion_listeners:
                listener(job)
        self._finish_auto_pool(job, self.account.settings.auto_pool_files_seconds)

    def _finish_auto_pool(self, job: Job, files_seconds: float = 0.0) -> None:
        auto = job.spec["poolInfo"].get("autoPoolSpecification")
        pool = job.auto_pool
        if (
            pool is not None
            and auto is not None
            and not auto.get("keepAlive")
            and pool.key in self.account.pools
            and pool.state != POOL_DELETING
        ):
            self.pools.delete_pool(pool.id, files_seconds)

    async def stop_running_tasks(self, job: Job, reason: str) -> None:
        running = [task for task in job.tasks.values() if task.state == RUNNING]
        for task in running:
            task.end_reason = reason
        runner = self.account.runner
        await asyncio.gather(*(runner.terminate(handle) for task in running for handle in task.run_handles()))
        while any(task.state == RUNNING for task in running):
            await asyncio.sleep(self.account.settings.tick_seconds / 2)

    def delete_job(self, job_id: str) -> None:
        job = self.account.job(job_id)
        if job.state == DELETING:
            return
        job.set_state(DELETING)
        self.account.spawn(self._delete(job))

    async def _delete(self, job: Job) -> None:
        await self.stop_running_tasks(job, "deleted")
        pool = self.account.pool_of(job)
        if pool is not None:
            for node in pool.nodes.values():
                shutil.rmtree(node.dirs.root / "workitems" / job.id, ignore_errors=True)
        self._finish_auto_pool(job)
        await asyncio.sleep(self.account.settings.delete_seconds)
        if self.account.jobs.get(job.key) is job:
            del self.account.jobs[job.key]

    def disable_job(self, job_id: str, body: Any) -> Job:
        job = self.account.job(job_id)
        if job.state not in (ACTIVE_JOB,):
            raise conflict("JobNotActive", f"The specified job is in the {job.state} state and cannot be disabled.")
        option = v.enum(body if isinstance(body, dict) else {}, "disableTasks", ("requeue", "terminate", "wait"))
        if option is None:
            raise invalid_property("disableTasks", None, "disableTasks must be requeue, terminate or wait.")
        job.set_state(DISABLING)
        job.touch()
        self.account.spawn(self._disable(job, option))
        return job

    async def _disable(self, job: Job, option: str) -> None:
        if option in ("requeue", "terminate"):
            await self.stop_running_tasks(job, option)
        if job.state == DISABLING:
            job.set_state(DISABLED)

    def enable_job(self, job_id: str) -> Job:
        job = self.account.job(job_id)
        if job.state not in (DISABLED, DISABLING):
            raise conflict("JobNotDisabled", f"The specified job is in the {job.state} state and cannot be enabled.")
        job.set_state(ENABLING)
        job.touch()
        job.set_state(ACTIVE_JOB)
        self.account.kick()
        return job

    def preparation_and_release_status(self, job_id: str) -> list[dict[str, Any]]:
        job = self.account.job(job_id)
        out = []
        for node_id, prep in job.preparation.items():
            entry: dict[str, Any] = {
                "poolId": job.pool_id,
                "nodeId": node_id,
                "jobPreparationTaskExecutionInfo": prep,
            }
            if node_id in job.release:
                entry["jobReleaseTaskExecutionInfo"] = job.release[node_id]
            out.append(entry)
        return out

    # -- what tasks do to their job -------------------------------------------------------------------
    def task_completed(self, task: Task) -> None:
        """A task is done for good: tasks waiting on it may go, and its exit options may act on the job."""
        job = task.job
        job.change_task_state(task, COMPLETED)
        release_waiting(job)
        if job.state == ACTIVE_JOB:
            # A success acts on the job too when an exitCodes entry for its code (0) says so.
            action = task.exit_options().get("jobAction", "none")
            if action == "terminate":
                self.begin_terminate(job, "TaskFailed")
            elif action == "disable":
                job.set_state(DISABLED)
        # "If true, when the Job Manager Task completes, the Batch service marks the Job as complete" (REST
        # reference, killJobOnCompletion); the job's terminateReason then reads JMComplete.
        manager = job.spec.get("jobManagerTask")
        if (
            job.state == ACTIVE_JOB
            and manager is not None
            and task.key == job.manager_key
            and manager.get("killJobOnCompletion", True)
        ):
            self.begin_terminate(job, "JMComplete")
        self.check_all_complete(job)

    def check_all_complete(self, job: Job) -> None:
        # A job without tasks stays open (the recorded service kept such a job active).
        if (
            job.state == ACTIVE_JOB
            and job.spec.get("onAllTasksComplete") == "terminatejob"
            and job.tasks
            and job.all_tasks_complete()
        ):
            self.begin_terminate(job, "AllTasksComplete")
