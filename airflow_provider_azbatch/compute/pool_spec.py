"""A Batch pool specification built from resource requirements, and its REST JSON body."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from airflow_provider_azbatch.compute.autoscale import (
    MAX_TASK_SLOTS_PER_NODE,
    MIN_EVALUATION_INTERVAL,
    AutoscaleSettings,
    autoscale_formula,
    check_node_bounds,
)
from airflow_provider_azbatch.compute.catalog import VmCatalog, VmSize, load_catalog
from airflow_provider_azbatch.compute.errors import InvalidPoolSpecError, VmSizeTooSmallError
from airflow_provider_azbatch.compute.images import PoolImage, pool_image
from airflow_provider_azbatch.compute.requirements import (
    ResourceRequirements,
    check_gpu_kind,
    fits,
    select_vm_size,
    vm_size_shortfalls,
)

_VM_SIZE_NAME = re.compile(r"(standard|basic)_[a-z0-9_]+", re.IGNORECASE)


def max_task_slots(vm: VmSize) -> int:
    """Batch caps taskSlotsPerNode at 4 x the size's vCPUs and at 256 (a size not in the catalog: 256)."""
    if not vm.vcpus:
        return MAX_TASK_SLOTS_PER_NODE
    return min(4 * vm.vcpus, MAX_TASK_SLOTS_PER_NODE)


def uncatalogued_size(name: str) -> VmSize:
    """A VM size named by the user that the catalog does not list: its name only (nothing to check it by)."""
    if not isinstance(name, str) or not _VM_SIZE_NAME.fullmatch(name.strip()):
        raise InvalidPoolSpecError(f"vm_size must be an Azure VM size name such as 'standard_hb120rs_v3', got {name!r}")
    return VmSize(name=name.strip().lower(), family="", vcpus=0, memory_gib=0.0, hourly_usd=0.0)


def named_vm_size(name: str, req: ResourceRequirements, catalog: VmCatalog | None = None) -> tuple[VmSize, bool]:
    """(the size, whether the catalog knows it): a catalogued size must fit ``req``; another is taken as it is."""
    catalog = catalog if catalog is not None else load_catalog()
    vm = catalog.find(name) if isinstance(name, str) else None
    if vm is None:
        return uncatalogued_size(name), False
    missing = vm_size_shortfalls(vm, req)
    if missing:
        raise VmSizeTooSmallError(
            f"vm_size {vm.describe()} does not fit a task with {req.describe()}: needs {', '.join(missing)}"
        )
    return vm, True


def default_task_slots(vm: VmSize, req: ResourceRequirements) -> int:
    """How many tasks of ``req`` fit side by side on ``vm`` (by vCPU, memory and GPUs), at least 1 (1 on a
    size the catalog does not know)."""
    if not vm.vcpus:
        return 1
    # The epsilon keeps 28 GiB / 1.12 GiB at 25 tasks: in floating point it is 24.999...
    limits = [
        math.floor(vm.vcpus / req.cpus + 1e-9),
        math.floor(vm.memory_gib / req.memory_gib + 1e-9),
    ]
    if req.gpus:
        limits.append(vm.gpus // req.gpus)
    return max(1, min(*limits, max_task_slots(vm)))


@dataclass(frozen=True)
class PoolSpec:
    """Everything needed to create a Batch pool except its id and networking.

    Either ``autoscale`` is set (and both fixed targets are 0, as the service requires) or the pool has
    ``target_dedicated_nodes`` + ``target_low_priority_nodes`` fixed nodes. ``container_image_names``
    are pre-fetched onto every node and need ``containers=True``.
    """

    vm_size: VmSize
    image: PoolImage
    max_nodes: int
    task_slots_per_node: int = 1
    target_dedicated_nodes: int = 0
    target_low_priority_nodes: int = 0
    autoscale: AutoscaleSettings | None = None
    containers: bool = False
    container_image_names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        names = self.container_image_names
        if isinstance(names, str) or not all(isinstance(n, str) and n.strip() for n in names):
            raise InvalidPoolSpecError(f"pool.container_image_names must be a list of image names, got {names!r}")
        object.__setattr__(self, "container_image_names", tuple(names))
        if names and not self.containers:
            raise InvalidPoolSpecError("pool.container_image_names needs containers=True")
        if isinstance(self.max_nodes, bool) or not isinstance(self.max_nodes, int) or self.max_nodes < 1:
            raise InvalidPoolSpecError(f"pool.max_nodes must be a whole number >= 1, got {self.max_nodes!r}")
        high = max_task_slots(self.vm_size)
        slots = self.task_slots_per_node
        if isinstance(slots, bool) or not isinstance(slots, int) or not 1 <= slots <= high:
            raise InvalidPoolSpecError(
                f"pool.task_slots_per_node must be between 1 and {high} for {self.vm_size.name} "
                f"(Batch allows 4 per vCPU, at most {MAX_TASK_SLOTS_PER_NODE}), got {slots!r}"
            )
        for field in ("target_dedicated_nodes", "target_low_priority_nodes"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidPoolSpecError(f"pool.{field} must be a whole number >= 0, got {value!r}")
            if self.autoscale is not None and value:
                raise InvalidPoolSpecError(
                    f"pool.{field} must be 0 when autoscale is set (the formula sets it), got {value}"
                )
        fixed = self.target_dedicated_nodes + self.target_low_priority_nodes
        if fixed > self.max_nodes:
            raise InvalidPoolSpecError(
                f"pool.target_dedicated_nodes + target_low_priority_nodes must be <= max_nodes "
                f"({self.max_nodes}), got {fixed}"
            )

    def fits(self, req: ResourceRequirements) -> bool:
        """Whether a task with ``req`` can run on this pool's nodes."""
        return fits(self.vm_size, req)

    def to_rest(self) -> dict[str, Any]:
        """The pool fields of a Batch REST (2025-06-01) add-pool body; the caller adds ``id``."""
        vm_config: dict[str, Any] = {
            "imageReference": self.image.image_reference(),
            "nodeAgentSKUId": self.image.node_agent_sku_id,
        }
        if self.containers:
            container: dict[str, Any] = {"type": "dockerCompatible"}
            if self.container_image_names:
                container["containerImageNames"] = list(self.container_image_names)
            vm_config["containerConfiguration"] = container
        body: dict[str, Any] = {
            "vmSize": self.vm_size.name,
            "virtualMachineConfiguration": vm_config,
            "taskSlotsPerNode": self.task_slots_per_node,
            "enableAutoScale": self.autoscale is not None,
        }
        if self.autoscale is not None:
            body["autoScaleFormula"] = self.autoscale.formula
            body["autoScaleEvaluationInterval"] = self.autoscale.evaluation_interval_iso
        else:
            body["targetDedicatedNodes"] = self.target_dedicated_nodes
            body["targetLowPriorityNodes"] = self.target_low_priority_nodes
        return body


def pool_spec_from_requirements(
    req: ResourceRequirements,
    *,
    max_nodes: int,
    min_nodes: int = 0,
    autoscale: bool = True,
    task_slots_per_node: int | None = None,
    container_images: Iterable[str] = (),
    catalog: VmCatalog | None = None,
    evaluation_interval: timedelta = MIN_EVALUATION_INTERVAL,
    vm_size: str | None = None,
    image: PoolImage | None = None,
    multi_node: int = 1,
) -> PoolSpec:
    """The cheapest pool able to run tasks of ``req``.

    With ``autoscale`` the pool follows its pending tasks between ``min_nodes`` and ``max_nodes``;
    without, it is a fixed pool of ``max_nodes`` nodes (``min_nodes`` unused). Nodes are spot/low
    priority when ``req.low_priority``. Giving ``container_images`` implies a container pool.
    ``task_slots_per_node`` defaults to how many such tasks fit on one node. ``vm_size`` names the size instead
    of choosing one (a size in the catalog must fit ``req``); ``image`` replaces the family's image.
    ``multi_node``: the most nodes one of its tasks needs at once (the formula's floor while tasks are pending).

    ``evaluation_interval`` defaults to the shortest the service allows, 5 minutes: an evaluation costs
    nothing, while every interval is, at worst, that long for a task to wait for a node and for a node
    whose work is done to stay paid (longer intervals only add idle time and latency).
    """
    check_node_bounds(max_nodes, min_nodes, prefix="pool", error=InvalidPoolSpecError)
    vm = select_vm_size(req, catalog) if vm_size is None else named_vm_size(vm_size, req, catalog)[0]
    slots = default_task_slots(vm, req) if task_slots_per_node is None else task_slots_per_node
    images = tuple(container_images)
    containers = req.containers or bool(images)
    if image is None:
        image = pool_image(req.os_image, containers=containers, gpu=vm.gpus > 0 or req.gpus > 0)
    elif containers and not image.containers:
        raise InvalidPoolSpecError(
            f"the tasks run in containers, but image {image.describe()} is not marked as having a container "
            "runtime: give an image with a Docker-compatible runtime and containers=True"
        )
    common: dict[str, Any] = {
        "vm_size": vm,
        "image": image,
        "max_nodes": max_nodes,
        "task_slots_per_node": slots,
        "containers": containers,
        "container_image_names": images,
    }
    if not autoscale:
        target = "target_low_priority_nodes" if req.low_priority else "target_dedicated_nodes"
        return PoolSpec(**{**common, target: max_nodes})
    # Built before the formula so a bad task_slots_per_node is reported as a pool field.
    spec = PoolSpec(**common)
    formula = autoscale_formula(
        max_nodes, min_nodes=min_nodes, low_priority=req.low_priority, task_slots_per_node=slots, multi_node=multi_node
    )
    return dataclasses.replace(spec, autoscale=AutoscaleSettings(formula, evaluation_interval))


def check_vm_size_fits(vm_size_name: str, req: ResourceRequirements, catalog: VmCatalog | None = None) -> None:
    """Raise ``VmSizeTooSmallError`` naming what an (existing pool's) VM size lacks for ``req``."""
    catalog = catalog if catalog is not None else load_catalog()
    check_gpu_kind(req, catalog)
    vm = catalog.get(vm_size_name)
    missing = vm_size_shortfalls(vm, req)
    if missing:
        raise VmSizeTooSmallError(
            f"VM size {vm.describe()} does not fit a task with {req.describe()}: needs {', '.join(missing)}"
        )
