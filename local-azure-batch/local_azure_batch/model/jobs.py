"""Jobs: their settings, their life cycle and the bookkeeping over their tasks."""

from __future__ import annotations

import copy
from collections import Counter, deque
from collections.abc import Callable, Collection
from datetime import datetime
from typing import TYPE_CHECKING, Any

from local_azure_batch.lang.times import UNLIMITED_TEXT, parse_duration

from . import validation as v
from .clock import iso
from .entity import Entity
from .errors import invalid_property
from .identity import normalize_user_identity
from .pool_config import SUBNET
from .tasks import ACTIVE, COMPLETED, PREPARING, RUNNING, Task

if TYPE_CHECKING:
    from .pools import Pool

ACTIVE_JOB, DISABLING, DISABLED, ENABLING = "active", "disabling", "disabled", "enabling"
TERMINATING, COMPLETED_JOB, DELETING = "terminating", "completed", "deleting"

ALL_TASKS_COMPLETE = ("noaction", "terminatejob")
# Checks an auto-pool specification (the pool module's, given by the caller) at a path in the body.
PoolSpecNormalizer = Callable[[Any, str], dict[str, Any]]
TASK_FAILURE = ("noaction", "performexitoptionsjobaction")


def normalize_job(body: Any, normalize_pool_spec: PoolSpecNormalizer) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise invalid_property("job", body, "The job must be a JSON object.")
    spec = copy.deepcopy(body)
    v.check_id(v.require(spec, "id"))
    pool_info = v.require(spec, "poolInfo")
    normalize_pool_info(pool_info, normalize_pool_spec)
    normalize_mutable_job_fields(spec)
    spec.setdefault("usesTaskDependencies", False)
    v.enum(spec, "onTaskFailure", TASK_FAILURE, "noaction")
    v.environment_settings(spec.get("commonEnvironmentSettings"), "commonEnvironmentSettings")
    prep = spec.get("jobPreparationTask")
    if prep is not None:
        v.require(prep, "commandLine", "jobPreparationTask.commandLine")
        prep.setdefault("id", "jobpreparation")
        constraints = prep.setdefault("constraints", {})
        v.duration(constraints, "maxWallClockTime", UNLIMITED_TEXT, "jobPreparationTask.constraints.maxWallClockTime")
        v.duration(constraints, "retentionTime", "P7D", "jobPreparationTask.constraints.retentionTime")
        constraints.setdefault("maxTaskRetryCount", 0)
        normalize_user_identity(prep, "jobPreparationTask.")
        prep.setdefault("waitForSuccess", True)
        prep.setdefault("rerunOnNodeRebootAfterSuccess", True)
    release = spec.get("jobReleaseTask")
    if release is not None:
        if prep is None:
            raise invalid_property(
                "jobReleaseTask", "...", "A job release task needs a job preparation task on the same job."
            )
        v.require(release, "commandLine", "jobReleaseTask.commandLine")
        release.setdefault("id", "jobrelease")
        v.duration(release, "maxWallClockTime", "PT15M", "jobReleaseTask.maxWallClockTime")
        v.duration(release, "retentionTime", "P7D", "jobReleaseTask.retentionTime")
        normalize_user_identity(release, "jobReleaseTask.")
    network = spec.get("networkConfiguration")
    if network is not None:
        if not isinstance(network, dict):
            raise invalid_property("networkConfiguration", network, "The value must be a JSON object.")
        subnet = v.require(network, "subnetId", "networkConfiguration.subnetId")
        if not isinstance(subnet, str) or not SUBNET.fullmatch(subnet):
            raise invalid_property("networkConfiguration.subnetId", subnet, "The value is not a subnet id.")
        if not isinstance(network.setdefault("skipWithdrawFromVNet", False), bool):
            raise invalid_property(
                "networkConfiguration.skipWithdrawFromVNet",
                network["skipWithdrawFromVNet"],
                "The value must be true or false.",
            )
    if spec.get("jobManagerTask") is not None:
        normalize_job_manager(spec["jobManagerTask"])
    return spec


# The job manager's own settings: the task made from it does not carry them.
JOB_MANAGER_ONLY = ("killJobOnCompletion", "runExclusive", "allowLowPriorityNode")


def normalize_job_manager(manager: Any) -> None:
    """The job manager task with the service's defaults (REST reference, ``JobManagerTask``); its task fields
    are checked again, as any task's, when the job is created."""
    if not isinstance(manager, dict):
        raise invalid_property("jobManagerTask", manager, "The job manager task must be a JSON object.")
    v.check_id(v.require(manager, "id", "jobManagerTask.id"), "jobManagerTask.id")
    if not isinstance(v.require(manager, "commandLine", "jobManagerTask.commandLine"), str):
        raise invalid_property("jobManagerTask.commandLine", manager["commandLine"], "The value must be a string.")
    for name in JOB_MANAGER_ONLY:
        if not isinstance(manager.setdefault(name, True), bool):
            raise invalid_property(f"jobManagerTask.{name}", manager[name], "The value must be true or false.")
    if v.integer(manager, "requiredSlots", minimum=1, path="jobManagerTask.requiredSlots") is None:
        manager["requiredSlots"] = 1
    constraints = manager.setdefault("constraints", {})
    if not isinstance(constraints, dict):
        raise invalid_property("jobManagerTask.constraints", constraints, "The constraints must be an object.")
    v.duration(constraints, "maxWallClockTime", UNLIMITED_TEXT, "jobManagerTask.constraints.maxWallClockTime")
    v.duration(constraints, "retentionTime", "P7D", "jobManagerTask.constraints.retentionTime")
    if (
        v.integer(constraints, "maxTaskRetryCount", minimum=-1, path="jobManagerTask.constraints.maxTaskRetryCount")
        is None
    ):
        constraints["maxTaskRetryCount"] = 0


def normalize_pool_info(pool_info: Any, normalize_pool_spec: PoolSpecNormalizer) -> None:
    if not isinstance(pool_info, dict) or not (pool_info.get("poolId") or pool_info.get("autoPoolSpecification")):
        raise invalid_property(
            "poolInfo", pool_info, "Specify either poolInfo.poolId or poolInfo.autoPoolSpecification."
        )
    auto = pool_info.get("autoPoolSpecification")
    if auto is not None:
        v.enum(
            auto,
            "poolLifetimeOption",
            ("job", "jobschedule"),
            path="poolInfo.autoPoolSpecification.poolLifetimeOption",
        )
        v.require(auto, "poolLifetimeOption", "poolInfo.autoPoolSpecification.poolLifetimeOption")
        auto.setdefault("keepAlive", False)
        auto["pool"] = normalize_pool_spec(
            v.require(auto, "pool", "poolInfo.autoPoolSpecification.pool"),
            "poolInfo.autoPoolSpecification.pool.",
        )


def normalize_mutable_job_fields(spec: dict[str, Any]) -> None:
    """The fields both create and update accept, with the service's defaults."""
    spec.setdefault("priority", 0)
    spec.setdefault("allowTaskPreemption", False)
    v.integer(spec, "priority", minimum=-1000, maximum=1000)
    spec.setdefault("maxParallelTasks", -1)
    if spec["maxParallelTasks"] == 0 or (v.integer(spec, "maxParallelTasks", minimum=-1) or 0) < -1:
        raise invalid_property("maxParallelTasks", 0, "maxParallelTasks must be -1 (no limit) or at least 1.")
    constraints = spec.setdefault("constraints", {})
    v.duration(constraints, "maxWallClockTime", UNLIMITED_TEXT, "constraints.maxWallClockTime")
    if v.integer(constraints, "maxTaskRetryCount", minimum=-1, path="constraints.maxTaskRetryCount") is None:
        constraints["maxTaskRetryCount"] = 0
    v.enum(spec, "onAllTasksComplete", ALL_TASKS_COMPLETE, "noaction")


class Job(Entity):
    def __init__(self, spec: dict[str, Any]) -> None:
        super().__init__(ACTIVE_JOB, spec)
        self.execution: dict[str, Any] = {"startTime": iso(self.creation_time)}
        self.tasks: dict[str, Task] = {}
        # Active tasks whose dependencies are met, in the order they were added.
        self.ready: deque[Task] = deque()
        # Active tasks still waiting for dependencies.
        self.waiting: dict[str, Task] = {}
        self.counts: Counter[str] = Counter()
        self.slot_counts: Counter[str] = Counter()
        # Instances of multi-instance tasks beyond their first, by task state ($ActiveTasks counts them).
        self.extra_instances: Counter[str] = Counter()
        self.auto_pool: Pool | None = None
        # Nodes that ran this job's preparation task: node id -> status record.
        self.preparation: dict[str, dict[str, Any]] = {}
        self.release: dict[str, dict[str, Any]] = {}
        self.wall_clock_deadline: datetime | None = None
        # The job schedule that made this job (``{scheduleId}:job-{n}``), if one did.
        self.schedule_id: str | None = None
        self.constraints_changed()
        # The tasks in id order, as lists show them; rebuilt only after tasks are added or deleted.
        self._sorted: list[Task] | None = None

    @property
    def path(self) -> str:
        return f"/jobs/{self.id}"

    @property
    def pool_id(self) -> str | None:
        if self.auto_pool is not None:
            return self.auto_pool.id
        return self.spec["poolInfo"].get("poolId")

    def constraints_changed(self) -> None:
        """Work out the wall clock deadline once, not on every tick."""
        text = self.spec["constraints"]["maxWallClockTime"]
        self.wall_clock_deadline = None if text == UNLIMITED_TEXT else self.creation_time + parse_duration(text)

    @property
    def manager_key(self) -> str | None:
        """The key of its job manager task, if it has one."""
        manager = self.spec.get("jobManagerTask")
        return str(manager["id"]).lower() if manager else None

    @property
    def is_schedulable(self) -> bool:
        return self.state == ACTIVE_JOB

    @property
    def accepts_tasks(self) -> bool:
        return self.state in (ACTIVE_JOB, DISABLING, DISABLED, ENABLING)

    @property
    def counts_against_quota(self) -> bool:
        """Completed jobs are not limited (the quota documentation); deleting ones are on their way out."""
        return self.state not in (COMPLETED_JOB, DELETING)

    # -- task bookkeeping ---------------------------------------------------------------------------
    def add_task(self, task: Task) -> None:
        self.tasks[task.key] = task
        self.count_task(task, +1)
        self._sorted = None

    def remove_task(self, task: Task) -> None:
        self.count_task(task, -1)
        del self.tasks[task.key]
        self.waiting.pop(task.key, None)
        self._sorted = None

    def sorted_tasks(self) -> list[Task]:
        if self._sorted is None:
            self._sorted = sorted(self.tasks.values(), key=lambda task: task.key)
        return self._sorted

    def count_task(self, task: Task, sign: int) -> None:
        state = RUNNING if task.state == PREPARING else task.state
        self.counts[state] += sign
        self.slot_counts[state] += sign * task.slots
        if task.is_multi_instance:
            self.extra_instances[state] += sign * (task.number_of_instances - 1)
        if task.state == COMPLETED:
            outcome = "succeeded" if task.execution.get("result") == "success" else "failed"
            self.counts[outcome] += sign
            self.slot_counts[outcome] += sign * task.slots

    def change_task_state(self, task: Task, state: str) -> None:
        self.count_task(task, -1)
        task.set_state(state)
        self.count_task(task, +1)

    def all_tasks_complete(self) -> bool:
        return self.counts[ACTIVE] == 0 and self.counts[RUNNING] == 0

    def task_counts(self) -> dict[str, Any]:
        def block(counter: Counter[str]) -> dict[str, int]:
            return {name: max(0, counter[name]) for name in ("active", "running", "completed", "succeeded", "failed")}

        return {"taskCounts": block(self.counts), "taskSlotCounts": block(self.slot_counts)}

    def running_count(self) -> int:
        return self.counts[RUNNING]

    def active_ready_count(self) -> int:
        """Active tasks whose dependencies are met: every waiting task is an active one."""
        return max(0, self.counts[ACTIVE] - len(self.waiting))

    def active_ready_instances(self) -> int:
        """``$ActiveTasks``: active tasks whose dependencies are met, a multi-instance task counted as its number
        of instances. "For a multi-instance task, $ActiveTasks will include the number of instances set on the
        task" (https://learn.microsoft.com/azure/batch/batch-automatic-scaling, the read-only variables)."""
        extra = self.extra_instances[ACTIVE]
        if extra:
            extra -= sum(task.number_of_instances - 1 for task in self.waiting.values() if task.is_multi_instance)
        return self.active_ready_count() + max(0, extra)

    def to_wire(self, base_url: str, fields: Collection[str] | None = None) -> dict[str, Any]:
        out = self._wire_start(f"{base_url}{self.path}", fields)
        self._wire_spec(out, fields)
        if fields is None or "executionInfo" in fields:
            execution = dict(self.execution)
            if self.pool_id:
                execution["poolId"] = self.pool_id
            out["executionInfo"] = execution
        return out

    def complete(self) -> None:
        """The job's end: its end time is when it became completed."""
        self.set_state(COMPLETED_JOB)
        self.execution["endTime"] = iso(self.state_time)
