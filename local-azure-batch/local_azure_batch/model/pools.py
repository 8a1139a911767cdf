"""Pools and their simulated compute nodes."""

from __future__ import annotations

import asyncio
import copy
import hashlib
import uuid
from collections import deque
from collections.abc import Collection
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from local_azure_batch.formula import Sample
from local_azure_batch.lang.times import parse_duration
from local_azure_batch.runner.layout import NodeDirs

from . import pool_config as config
from . import validation as v
from .clock import iso, utcnow
from .entity import Entity
from .errors import invalid_property
from .identity import normalize_user_identity, username
from .node_endpoints import add_network
from .tasks import RecentRun
from .vm_sizes import check_vm_size

if TYPE_CHECKING:
    from .task_instances import TaskInstance
    from .tasks import Task

POOL_ACTIVE, POOL_DELETING = "active", "deleting"
STEADY, RESIZING, STOPPING = "steady", "resizing", "stopping"

# Node states (the subset a simulated node goes through).
CREATING, STARTING, WAITING_FOR_START_TASK, START_TASK_FAILED = (
    "creating",
    "starting",
    "waitingforstarttask",
    "starttaskfailed",
)
IDLE, RUNNING, LEAVING_POOL, UNUSABLE, PREEMPTED = "idle", "running", "leavingpool", "unusable", "preempted"
# What node operations (model/node_operations.py) put a node through.
REBOOTING, REIMAGING, OFFLINE, DEALLOCATING, DEALLOCATED = (
    "rebooting",
    "reimaging",
    "offline",
    "deallocating",
    "deallocated",
)
SCHEDULING_ENABLED, SCHEDULING_DISABLED = "enabled", "disabled"
AGENT_LOG = "agent.log"
# Every node state, as node counts spell them (in their order), by the lower-case name a node has.
NODE_STATES = {
    name.lower(): name
    for name in (
        "creating",
        "deallocated",
        "deallocating",
        "idle",
        "leavingPool",
        "offline",
        "preempted",
        "rebooting",
        "reimaging",
        "running",
        "starting",
        "startTaskFailed",
        "unusable",
        "unknown",
        "upgradingOS",
        "waitingForStartTask",
    )
}

DEALLOCATION_OPTIONS = ("requeue", "terminate", "taskcompletion", "retaineddata")
MIN_AUTOSCALE_INTERVAL = timedelta(minutes=5)
MAX_AUTOSCALE_INTERVAL = timedelta(hours=168)
SAMPLE_HISTORY = timedelta(hours=1)


def normalize_pool(
    body: Any,
    path: str = "",
    *,
    require_id: bool = True,
    subscription_id: str | None = None,
    extra_vm_sizes: Collection[str] = (),
    unavailable_vm_sizes: Collection[str] = (),
    region: str = "",
) -> dict[str, Any]:
    """Validate a pool (or auto-pool) specification and fill in the service's defaults."""
    if not isinstance(body, dict):
        raise invalid_property(path.rstrip(".") or "pool", body, "The pool must be a JSON object.")
    spec = copy.deepcopy(body)
    if require_id:
        v.check_id(v.require(spec, "id"))
    vm_size = v.require(spec, "vmSize", f"{path}vmSize")
    check_vm_size(str(vm_size), extra_vm_sizes, unavailable_vm_sizes, region)
    spec["vmSize"] = str(vm_size).lower()
    vm_config = v.require(spec, "virtualMachineConfiguration", f"{path}virtualMachineConfiguration")
    image = v.require(vm_config, "imageReference", f"{path}virtualMachineConfiguration.imageReference")
    config.normalize_image_reference(image, f"{path}virtualMachineConfiguration.imageReference")
    agent = v.require(vm_config, "nodeAgentSKUId", f"{path}virtualMachineConfiguration.nodeAgentSKUId")
    config.normalize_data_disks(vm_config.get("dataDisks"), f"{path}virtualMachineConfiguration.dataDisks")
    config.normalize_user_accounts(
        spec.get("userAccounts"), f"{path}userAccounts", windows="windows" in str(agent).lower()
    )
    config.normalize_mounts(spec.get("mountConfiguration"), f"{path}mountConfiguration")
    container = vm_config.get("containerConfiguration")
    if container is not None:
        v.enum(
            container,
            "type",
            ("dockerCompatible", "criCompatible"),
            path=f"{path}virtualMachineConfiguration.containerConfiguration.type",
        )
        v.require(container, "type", f"{path}virtualMachineConfiguration.containerConfiguration.type")
    if spec.get("networkConfiguration") is not None:
        config.normalize_network(spec["networkConfiguration"], f"{path}networkConfiguration", subscription_id)
    v.duration(spec, "resizeTimeout", "PT15M", f"{path}resizeTimeout")
    spec.setdefault("taskSlotsPerNode", 1)
    v.integer(spec, "taskSlotsPerNode", minimum=1, maximum=256, path=f"{path}taskSlotsPerNode")
    if "taskSchedulingPolicy" in spec:
        # nodeFillType is required in a policy a client gives; without one, the service's defaults apply.
        if not isinstance(spec["taskSchedulingPolicy"], dict):
            raise invalid_property(
                f"{path}taskSchedulingPolicy", spec["taskSchedulingPolicy"], "The value must be a JSON object."
            )
        v.require(spec["taskSchedulingPolicy"], "nodeFillType", f"{path}taskSchedulingPolicy.nodeFillType")
    policy = spec.setdefault("taskSchedulingPolicy", {})
    v.enum(policy, "nodeFillType", ("Spread", "Pack"), "Spread", f"{path}taskSchedulingPolicy.nodeFillType")
    v.enum(
        policy,
        "jobDefaultOrder",
        ("none", "creationtime"),
        "none",
        f"{path}taskSchedulingPolicy.jobDefaultOrder",
    )
    spec.setdefault("enableInterNodeCommunication", False)
    spec.setdefault("enableAutoScale", False)
    if spec["enableAutoScale"]:
        v.require(spec, "autoScaleFormula", f"{path}autoScaleFormula")
        check_autoscale_interval(spec, path)
        for name in ("targetDedicatedNodes", "targetLowPriorityNodes"):
            if spec.get(name):
                raise invalid_property(
                    f"{path}{name}", spec[name], f"{name} cannot be set when enableAutoScale is true."
                )
    else:
        if spec.get("autoScaleFormula"):
            raise invalid_property(
                f"{path}autoScaleFormula", "...", "autoScaleFormula needs enableAutoScale set to true."
            )
        for name in ("targetDedicatedNodes", "targetLowPriorityNodes"):
            spec.setdefault(name, 0)
            v.integer(spec, name, minimum=0, maximum=10000, path=f"{path}{name}")
    start_task = spec.get("startTask")
    if start_task is not None:
        v.require(start_task, "commandLine", f"{path}startTask.commandLine")
        start_task.setdefault("maxTaskRetryCount", 0)
        start_task.setdefault("waitForSuccess", True)
        normalize_user_identity(start_task, f"{path}startTask.")
        user = username(start_task)
        if user is not None and user.lower() not in config.user_names(spec):
            raise invalid_property(
                f"{path}startTask.userIdentity.username", user, "The user is not one of the pool's userAccounts."
            )
    return spec


def check_autoscale_interval(spec: dict[str, Any], path: str = "") -> None:
    v.duration(spec, "autoScaleEvaluationInterval", "PT15M", f"{path}autoScaleEvaluationInterval")
    interval = parse_duration(spec["autoScaleEvaluationInterval"])
    if not MIN_AUTOSCALE_INTERVAL <= interval <= MAX_AUTOSCALE_INTERVAL:
        raise invalid_property(
            f"{path}autoScaleEvaluationInterval",
            spec["autoScaleEvaluationInterval"],
            "The autoscale evaluation interval must be between 5 minutes and 168 hours.",
        )


class ComputeNode:
    def __init__(self, pool: Pool, index: int, dedicated: bool, task_root: Path, ip_address: str) -> None:
        digest = hashlib.sha256(f"{pool.id}/{index}/{uuid.uuid4()}".encode()).hexdigest()
        self.id = f"tvmps_{digest}_{'d' if dedicated else 'p'}"
        self.pool = pool
        self.index = index
        self.is_dedicated = dedicated
        self.state = CREATING
        self.state_time = utcnow()
        self.allocation_time = self.state_time
        self.last_boot_time: datetime | None = None
        # Its own loopback address (model.addresses), reachable from the other nodes.
        self.ip_address = ip_address
        self.dirs = NodeDirs.for_node(task_root, pool.id, self.id)
        self.running: dict[int, Task] = {}
        self.running_slots = 0
        self.total_run = 0
        self.total_succeeded = 0
        # What recentTasks shows: an attempt of a task, or the subtask of a multi-instance task this node ran.
        self.recent: deque[RecentRun | TaskInstance] = deque(maxlen=5)
        self.start_task_info: dict[str, Any] | None = None
        # The node's errors (a mount that failed), as its ``errors`` show them.
        self.errors: list[dict[str, Any]] = []
        # Set when the pool shrinks and this node must go once its tasks are done.
        self.leaving = False
        self.removal: asyncio.Task[None] | None = None
        # disablescheduling: no new task starts here (a node with nothing to run is offline then).
        self.scheduling_state = SCHEDULING_ENABLED
        # A reboot, reimage or deallocation waiting for the node's tasks to end: no new task starts here.
        self.pending_operation: str | None = None
        # Users made on the node (nodes/{id}/users), by lower-case name; passwords are never returned.
        self.users: dict[str, dict[str, Any]] = {}
        # A preempted Spot node coming back (model/spot.py): listed while it is created again.
        self.recovering = False

    @property
    def affinity_id(self) -> str:
        return f"TVM:{self.id}"

    @property
    def usable(self) -> bool:
        return (
            self.state in (IDLE, RUNNING)
            and not self.leaving
            and self.scheduling_state == SCHEDULING_ENABLED
            and self.pending_operation is None
        )

    @property
    def ready_state(self) -> str:
        """The state of a node up and doing nothing: idle, or offline when scheduling is disabled on it."""
        return IDLE if self.scheduling_state == SCHEDULING_ENABLED else OFFLINE

    def agent_log(self, message: str, level: str = "INFO") -> None:
        """A line of the node agent's own log (what ``uploadbatchservicelogs`` uploads), if the node has booted."""
        folder = self.dirs.agent_logs
        try:
            folder.mkdir(parents=True, exist_ok=True)
            with open(folder / AGENT_LOG, "a", encoding="utf-8") as out:
                out.write(f"{iso(utcnow())} {level:<5} {message}\n")
        except OSError:  # the node's files are going (the pool is deleted): nothing left to log to
            pass

    def free_slots(self) -> int:
        return self.pool.task_slots - self.running_slots

    def set_state(self, state: str) -> None:
        if state != self.state:
            if {state, self.state} != {IDLE, RUNNING}:  # tasks starting and ending log lines of their own
                self.agent_log(
                    f"node state {self.state} -> {state}", "WARN" if state in (UNUSABLE, START_TASK_FAILED) else "INFO"
                )
                for error in self.errors if state == UNUSABLE else []:
                    self.agent_log(f"node error {error.get('code')}: {error.get('message')}", "ERROR")
            self.state, self.state_time = state, utcnow()

    def add_task(self, task: Task, instance: TaskInstance | None = None) -> None:
        self.running[id(task)] = task
        self.running_slots += task.slots
        self.total_run += 1
        self.recent.append(instance or RecentRun(task))
        self.agent_log(f"task {task.job.id}/{task.id} started")
        self.set_state(RUNNING)

    def remove_task(self, task: Task, succeeded: bool | None = None) -> None:
        """``succeeded`` tells how a subtask went; a task's own result counts otherwise."""
        if self.running.pop(id(task), None) is not None:
            self.running_slots -= task.slots
            if succeeded is None:
                succeeded = task.execution.get("result") == "success"
            self.total_succeeded += int(succeeded)
            self.agent_log(f"task {task.job.id}/{task.id} ended ({'succeeded' if succeeded else 'not succeeded'})")
        if not self.running and self.state == RUNNING:
            self.set_state(self.ready_state)

    @property
    def path(self) -> str:
        return f"{self.pool.path}/nodes/{self.id}"

    def task_info(self, base_url: str, task_dir: Path) -> dict[str, Any]:
        """The ``nodeInfo`` of a task (or subtask) that ran here, in ``task_dir``."""
        node_url = f"{base_url}{self.path}"
        root = self.dirs.relative(task_dir)
        return {
            "affinityId": self.affinity_id,
            "nodeUrl": node_url,
            "poolId": self.pool.id,
            "nodeId": self.id,
            "taskRootDirectory": root,
            "taskRootDirectoryUrl": f"{node_url}/files/{root}",
        }

    def to_wire(self, base_url: str, fields: Collection[str] | None = None) -> dict[str, Any]:
        """The whole node (a ``$select`` is applied to it afterwards)."""
        out: dict[str, Any] = {
            "id": self.id,
            "url": f"{base_url}{self.path}",
            "state": self.state,
            "schedulingState": self.scheduling_state,
            "stateTransitionTime": iso(self.state_time),
            "allocationTime": iso(self.allocation_time),
            "ipAddress": self.ip_address,
            "affinityId": self.affinity_id,
            "vmSize": self.pool.spec["vmSize"],
            "totalTasksRun": self.total_run,
            "totalTasksSucceeded": self.total_succeeded,
            "runningTasksCount": len(self.running),
            "runningTaskSlotsCount": self.running_slots,
            "isDedicated": self.is_dedicated,
        }
        add_network(out, self)
        if self.last_boot_time is not None:
            out["lastBootTime"] = iso(self.last_boot_time)
            out["nodeAgentInfo"] = {"lastUpdateTime": iso(self.last_boot_time), "version": "1.12.34"}
        if self.recent:
            out["recentTasks"] = [entry.recent_info(base_url) for entry in self.recent]
        start_task = self.pool.spec.get("startTask")
        if start_task is not None:
            out["startTask"] = v.without_secrets(start_task)
        if self.start_task_info is not None:
            out["startTaskInfo"] = dict(self.start_task_info)
        if self.errors:
            out["errors"] = [dict(error) for error in self.errors]
        image = self.pool.spec["virtualMachineConfiguration"]["imageReference"]
        out["virtualMachineInfo"] = {"imageReference": {**image, "exactVersion": _exact_version(image)}}
        return out


def _exact_version(image: dict[str, Any]) -> str:
    """The version a node runs: the marketplace version given, or the one an image id names (else ``latest``)."""
    if "version" in image:
        return str(image["version"])
    image_id = next((str(value) for name, value in image.items() if name.endswith("ImageId")), "")
    head, sep, version = image_id.rpartition("/")
    return version if sep and head.lower().endswith("/versions") else "latest"


class Pool(Entity):
    def __init__(self, spec: dict[str, Any], *, owner_job: str | None = None) -> None:
        super().__init__(POOL_ACTIVE, spec)
        self.owner_job = owner_job
        self.allocation_state = STEADY
        self.allocation_time = self.creation_time
        self.nodes: dict[str, ComputeNode] = {}
        self.node_counter = 0
        self.resize_errors: list[dict[str, Any]] = []
        self.auto_scale_run: dict[str, Any] | None = None
        self.next_autoscale: datetime | None = None
        self.deallocation_option = "requeue"
        self.samples: deque[tuple[datetime, dict[str, float]]] = deque()
        self.resize_started: datetime | None = None
        # Short of its Spot target for want of Spot capacity: it keeps resizing until capacity returns.
        self.seeking_spot = False
        # Per job priority, the job whose task the scheduler started last (jobs of equal priority take turns).
        self.served_last: dict[int, str] = {}

    @property
    def path(self) -> str:
        return f"/pools/{self.id}"

    @property
    def task_slots(self) -> int:
        return int(self.spec["taskSlotsPerNode"])

    @property
    def target_dedicated(self) -> int:
        return int(self.spec.get("targetDedicatedNodes") or 0)

    @property
    def target_low_priority(self) -> int:
        return int(self.spec.get("targetLowPriorityNodes") or 0)

    def members(self, dedicated: bool) -> list[ComputeNode]:
        return [node for node in self.nodes.values() if node.is_dedicated == dedicated and not node.leaving]

    def set_allocation(self, state: str) -> None:
        if state != self.allocation_state:
            self.allocation_state, self.allocation_time = state, utcnow()

    # -- autoscale sample history (the SampleHistory protocol of model.autoscale) ------------------
    def record_sample(self, values: dict[str, float]) -> None:
        now = utcnow()
        self.samples.append((now, values))
        while self.samples and now - self.samples[0][0] > SAMPLE_HISTORY:
            self.samples.popleft()

    def samples_of(self, variable: str) -> list[Sample]:
        return [Sample(at=at, value=values[variable]) for at, values in self.samples if variable in values]

    def to_wire(self, base_url: str, fields: Collection[str] | None = None) -> dict[str, Any]:
        """The whole pool (a ``$select`` is applied to it afterwards)."""
        out = self._wire_start(f"{base_url}{self.path}", None)
        out["allocationState"] = self.allocation_state
        out["allocationStateTransitionTime"] = iso(self.allocation_time)
        out["vmSize"] = self.spec["vmSize"]
        out["resizeTimeout"] = self.spec["resizeTimeout"]
        out["currentDedicatedNodes"] = sum(1 for node in self.nodes.values() if node.is_dedicated)
        out["targetDedicatedNodes"] = self.target_dedicated
        out["currentLowPriorityNodes"] = sum(1 for node in self.nodes.values() if not node.is_dedicated)
        out["targetLowPriorityNodes"] = self.target_low_priority
        if self.resize_errors:
            out["resizeErrors"] = list(self.resize_errors)
        out["enableAutoScale"] = bool(self.spec.get("enableAutoScale"))
        if self.spec.get("enableAutoScale"):
            out["autoScaleFormula"] = self.spec["autoScaleFormula"]
            out["autoScaleEvaluationInterval"] = self.spec["autoScaleEvaluationInterval"]
            if self.auto_scale_run is not None:
                out["autoScaleRun"] = dict(self.auto_scale_run)
        self._wire_spec(out, None)
        return out
