"""Job operations and the job life cycle: terminate, delete, disable, auto-pools."""

from __future__ import annotations

import asyncio
import logging
import shutil
import uuid
from dataclasses import dataclass
from typing import Any

from local_azure_batch.model.base import ServiceBase
from local_azure_batch.rest.errors import (
    already_exists,
    conflict,
    invalid_property,
    not_found,
)

from . import validation as v
from .jobs import (
    ACTIVE_JOB,
    COMPLETED_JOB,
    DELETING,
    DISABLED,
    DISABLING,
    ENABLING,
    TERMINATING,
    Job,
    normalize_job,
    normalize_mutable_job_fields,
    normalize_pool_info,
)
from .pools import (
    POOL_DELETING,
    Pool,
    normalize_pool,
)
from .tasks import (
    RUNNING,
)

log = logging.getLogger(__name__)


@dataclass
class JobOperations(ServiceBase):
    # -- jobs -----------------------------------------------------------------------------------------
    def create_job(self, body: Any) -> Job:
        spec = normalize_job(body, normalize_pool_spec=lambda pool, path: normalize_pool(pool, path, require_id=False))
        existing = self.jobs.get(spec["id"].lower())
        if existing is not None:
            if existing.state == DELETING:
                raise conflict(
                    "JobBeingDeleted",
                    "The specified job has been marked for deletion and is being garbage collected.",
                )
            raise already_exists("Job")
        job = Job(spec)
        auto = spec["poolInfo"].get("autoPoolSpecification")
        if auto is not None:
            pool_id = str(uuid.uuid4()).upper()
            if auto.get("autoPoolIdPrefix"):
                pool_id = f"{auto['autoPoolIdPrefix']}_{pool_id}"[:64]
            job.auto_pool = self._add_pool(Pool({**auto["pool"], "id": pool_id}, owner_job=job.id))
        self.jobs[job.key] = job
        self._check_all_complete(job)
        self.kick()
        return job

    def get_job(self, job_id: str) -> Job:
        job = self.jobs.get(job_id.lower())
        if job is None:
            raise not_found("Job")
        return job

    def list_jobs(self) -> list[Job]:
        return sorted(self.jobs.values(), key=lambda job: job.key)

    def update_job(self, job_id: str, body: Any, replace: bool) -> Job:
        job = self.get_job(job_id)
        if job.state in (COMPLETED_JOB, TERMINATING):
            raise conflict("JobCompleted", "The specified job is already in a completed state.")
        if job.state == DELETING:
            raise conflict(
                "JobBeingDeleted",
                "The specified job has been marked for deletion and is being garbage collected.",
            )
        if not isinstance(body, dict):
            raise invalid_property("job", body, "The body must be a JSON object.")
        updatable = (
            "priority",
            "maxParallelTasks",
            "allowTaskPreemption",
            "constraints",
            "onAllTasksComplete",
            "metadata",
            "poolInfo",
            "networkConfiguration",
        )
        candidate = {name: job.spec[name] for name in updatable if name in job.spec and not replace}
        candidate.update({name: body[name] for name in updatable if name in body})
        if replace:
            candidate.setdefault("poolInfo", job.spec["poolInfo"])
        normalize_mutable_job_fields(candidate)
        if "poolInfo" in body:
            normalize_pool_info(candidate["poolInfo"], lambda pool, path: normalize_pool(pool, path, require_id=False))
            if job.state != DISABLED and candidate["poolInfo"] != job.spec["poolInfo"]:
                raise conflict("JobNotDisabled", "The pool of a job can only be changed while the job is disabled.")
        for name in updatable:
            if name in candidate:
                job.spec[name] = candidate[name]
            elif replace:
                job.spec.pop(name, None)
        if "onTaskFailure" in body:
            v.enum(body, "onTaskFailure", ("noaction", "performexitoptionsjobaction"))
            job.spec["onTaskFailure"] = body["onTaskFailure"]
        job.touch()
        self._check_all_complete(job)
        self.kick()
        return job

    def terminate_job(self, job_id: str, reason: str | None) -> Job:
        job = self.get_job(job_id)
        if job.state == COMPLETED_JOB:
            raise conflict("JobCompleted", "The specified job is already in a completed state.")
        if job.state == DELETING:
            raise conflict(
                "JobBeingDeleted",
                "The specified job has been marked for deletion and is being garbage collected.",
            )
        if job.state != TERMINATING:
            job.touch()
            self._begin_terminate(job, reason or "UserTerminate")
        return job

    def _begin_terminate(self, job: Job, reason: str) -> None:
        job.set_state(TERMINATING)
        job.execution["terminateReason"] = reason
        self._spawn(self._terminate(job))

    async def _terminate(self, job: Job) -> None:
        await self._stop_running_tasks(job, "job_terminated")
        await self._run_release_tasks(job)
        if job.state == TERMINATING:
            job.set_state(COMPLETED_JOB)
            job.mark_ended()
        self._finish_auto_pool(job)

    def _finish_auto_pool(self, job: Job) -> None:
        auto = job.spec["poolInfo"].get("autoPoolSpecification")
        pool = job.auto_pool
        if (
            pool is not None
            and auto is not None
            and not auto.get("keepAlive")
            and pool.key in self.pools
            and pool.state != POOL_DELETING
        ):
            self.delete_pool(pool.id)

    async def _stop_running_tasks(self, job: Job, reason: str) -> None:
        running = [task for task in job.tasks.values() if task.state == RUNNING]
        for task in running:
            task.end_reason = reason
        await asyncio.gather(*(self.runner.terminate(handle) for task in running for handle in task.run_handles()))
        while any(task.state == RUNNING for task in running):
            await asyncio.sleep(self.settings.tick_seconds / 2)

    def delete_job(self, job_id: str) -> None:
        job = self.get_job(job_id)
        if job.state == DELETING:
            return
        job.set_state(DELETING)
        self._spawn(self._delete_job(job))

    async def _delete_job(self, job: Job) -> None:
        await self._stop_running_tasks(job, "deleted")
        pool = self.pools.get((job.pool_id or "").lower())
        if pool is not None:
            for node in pool.nodes.values():
                shutil.rmtree(node.dirs.root / "workitems" / job.id, ignore_errors=True)
        self._finish_auto_pool(job)
        await asyncio.sleep(self.settings.delete_seconds)
        if self.jobs.get(job.key) is job:
            del self.jobs[job.key]

    def disable_job(self, job_id: str, body: Any) -> Job:
        job = self.get_job(job_id)
        if job.state not in (ACTIVE_JOB,):
            raise conflict("JobNotActive", f"The specified job is in the {job.state} state and cannot be disabled.")
        option = v.enum(body if isinstance(body, dict) else {}, "disableTasks", ("requeue", "terminate", "wait"))
        if option is None:
            raise invalid_property("disableTasks", None, "disableTasks must be requeue, terminate or wait.")
        job.set_state(DISABLING)
        job.touch()
        self._spawn(self._disable(job, option))
        return job

    async def _disable(self, job: Job, option: str) -> None:
        if option in ("requeue", "terminate"):
            await self._stop_running_tasks(job, "requeue" if option == "requeue" else "terminate")
        if job.state == DISABLING:
            job.set_state(DISABLED)

    def enable_job(self, job_id: str) -> Job:
        job = self.get_job(job_id)
        if job.state not in (DISABLED, DISABLING):
            raise conflict("JobNotDisabled", f"The specified job is in the {job.state} state and cannot be enabled.")
        job.set_state(ENABLING)
        job.touch()
        job.set_state(ACTIVE_JOB)
        self.kick()
        return job

    def preparation_and_release_status(self, job_id: str) -> list[dict[str, Any]]:
        job = self.get_job(job_id)
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

    def _check_all_complete(self, job: Job) -> None:
        # A job without tasks stays open (the recorded service kept such a job active).
        if (
            job.state == ACTIVE_JOB
            and job.spec.get("onAllTasksComplete") == "terminatejob"
            and job.tasks
            and job.all_tasks_complete()
        ):
            self._begin_terminate(job, "AllTasksComplete")
