"""Where a job runs: an existing pool, a named shared pool created if missing, or a job-scoped auto-pool.

    BatchPool.existing("nightly-pool", requirements={"cpus": 4})         # checked: exists, VM size fits
    BatchPool.shared("gpu-a100", requirements={"gpus": 4, "gpu_kind": "A100"}, max_nodes=4)
    BatchPool.auto(requirements={"cpus": 2, "memory": "8Gi"}, max_nodes=10)   # deleted with the job

Pools this provider creates get their VM size, image, node agent and autoscale formula from the
requirements (see :mod:`airflow_provider_azbatch.compute`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from airflow_provider_azbatch.compute import ResourceRequirements, pool_spec_from_requirements
from airflow_provider_azbatch.submission.shell import shell_command

Kind = Literal["existing", "shared", "auto"]


class PoolStrategyError(ValueError):
    pass


def _requirements(value: ResourceRequirements | Mapping[str, Any] | None) -> ResourceRequirements | None:
    if value is None or isinstance(value, ResourceRequirements):
        return value
    if not isinstance(value, Mapping):
        raise PoolStrategyError(f"requirements must be ResourceRequirements or a mapping, got {type(value).__name__}")
    data = dict(value)
    memory = data.pop("memory", None)
    try:
        if memory is not None:
            return ResourceRequirements.with_memory(memory, **data)
        return ResourceRequirements(**data)
    except TypeError as exc:
        raise PoolStrategyError(f"requirements: {exc}") from None


@dataclass(frozen=True)
class BatchPool:
    kind: Kind
    pool_id: str | None = None
    requirements: ResourceRequirements | None = None
    max_nodes: int = 1
    min_nodes: int = 0
    autoscale: bool = True
    task_slots_per_node: int | None = None
    container_images: tuple[str, ...] = ()
    start_task: str | None = None
    auto_pool_prefix: str = "airflow"
    metadata: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def existing(cls, pool_id: str, requirements: ResourceRequirements | Mapping[str, Any] | None = None) -> BatchPool:
        """A pool that must exist; with ``requirements``, its VM size is checked to fit them."""
        return cls("existing", pool_id=pool_id, requirements=_requirements(requirements))

    @classmethod
    def shared(
        cls,
        pool_id: str,
        requirements: ResourceRequirements | Mapping[str, Any],
        *,
        max_nodes: int = 1,
        min_nodes: int = 0,
        autoscale: bool = True,
        task_slots_per_node: int | None = None,
        container_images: Sequence[str] = (),
        start_task: str | None = None,
    ) -> BatchPool:
        """A named pool shared by DAGs: created from ``requirements`` if missing, reused if it matches."""
        return cls(
            "shared",
            pool_id=pool_id,
            requirements=_requirements(requirements),
            max_nodes=max_nodes,
            min_nodes=min_nodes,
            autoscale=autoscale,
            task_slots_per_node=task_slots_per_node,
            container_images=tuple(container_images),
            start_task=start_task,
        )

    @classmethod
    def auto(
        cls,
        requirements: ResourceRequirements | Mapping[str, Any],
        *,
        max_nodes: int = 1,
        min_nodes: int = 0,
        autoscale: bool = False,
        task_slots_per_node: int | None = None,
        container_images: Sequence[str] = (),
        start_task: str | None = None,
        prefix: str = "airflow",
    ) -> BatchPool:
        """A pool made with the job and deleted when it ends (default: ``max_nodes`` fixed nodes)."""
        return cls(
            "auto",
            requirements=_requirements(requirements),
            max_nodes=max_nodes,
            min_nodes=min_nodes,
            autoscale=autoscale,
            task_slots_per_node=task_slots_per_node,
            container_images=tuple(container_images),
            start_task=start_task,
            auto_pool_prefix=prefix,
        )

    def __post_init__(self) -> None:
        if self.kind in ("existing", "shared") and not self.pool_id:
            raise PoolStrategyError(f"a {self.kind} pool needs pool_id")
        if self.kind in ("shared", "auto") and self.requirements is None:
            raise PoolStrategyError(f"a {self.kind} pool needs requirements (cpus, memory, gpus...) to be sized from")

    def pool_body(
        self,
        *,
        containers: bool,
        multi_node: int,
        registries: Sequence[Mapping[str, Any]] = (),
        task_images: Sequence[str] = (),
    ) -> dict[str, Any]:
        """REST fields of the pool to create (without ``id``), for tasks needing up to ``multi_node`` nodes.

        Its nodes pre-fetch ``task_images`` (the images of the tasks it is created for) besides the
        strategy's own ``container_images``, so no task waits for a pull on a paid node.
        """
        assert self.requirements is not None
        if multi_node > self.max_nodes:
            raise PoolStrategyError(
                f"a task needs {multi_node} nodes at once but the pool has max_nodes={self.max_nodes}: raise max_nodes"
            )
        if multi_node > 1 and self.task_slots_per_node not in (None, 1):
            raise PoolStrategyError(
                f"multi-node tasks need one task slot per node, but the pool asks for task_slots_per_node="
                f"{self.task_slots_per_node}: leave it unset"
            )
        requirements = self.requirements
        if containers and not requirements.containers:
            requirements = dataclasses.replace(requirements, containers=True)
        # A multi-node task needs all its nodes at the same time: autoscaling by pending tasks would stop short.
        min_nodes = max(self.min_nodes, multi_node if multi_node > 1 else 0)
        spec = pool_spec_from_requirements(
            requirements,
            max_nodes=self.max_nodes,
            min_nodes=min_nodes,
            autoscale=self.autoscale,
            # The service runs multi-node tasks only on pools with one task slot per node.
            task_slots_per_node=1 if multi_node > 1 else self.task_slots_per_node,
            container_images=tuple(dict.fromkeys([*self.container_images, *task_images])),
        )
        body = spec.to_rest()
        if multi_node > 1:
            body["enableInterNodeCommunication"] = True
        if registries and "containerConfiguration" in body["virtualMachineConfiguration"]:
            body["virtualMachineConfiguration"]["containerConfiguration"]["containerRegistries"] = list(registries)
        if self.start_task:
            # A shell command, like a task's: the node runs a start task's command line without a shell.
            command_line = shell_command(self.start_task)
            body["startTask"] = {"commandLine": command_line, "waitForSuccess": True, "maxTaskRetryCount": 1}
        return body


def pool_differences(existing: Mapping[str, Any], wanted: Mapping[str, Any]) -> list[str]:
    """What makes an existing pool (REST JSON) different from the pool this task would create."""

    def image(body: Mapping[str, Any]) -> tuple[Any, ...]:
        ref = body.get("virtualMachineConfiguration", {}).get("imageReference", {})
        return tuple(str(ref.get(key, "")).lower() for key in ("publisher", "offer", "sku"))

    def containers(body: Mapping[str, Any]) -> bool:
        return body.get("virtualMachineConfiguration", {}).get("containerConfiguration") is not None

    checks = [
        ("vmSize", str(existing.get("vmSize", "")).lower(), str(wanted.get("vmSize", "")).lower()),
        ("image", image(existing), image(wanted)),
        (
            "nodeAgentSKUId",
            existing.get("virtualMachineConfiguration", {}).get("nodeAgentSKUId"),
            wanted.get("virtualMachineConfiguration", {}).get("nodeAgentSKUId"),
        ),
        ("taskSlotsPerNode", existing.get("taskSlotsPerNode", 1), wanted.get("taskSlotsPerNode", 1)),
        ("containers", containers(existing), containers(wanted)),
        ("enableAutoScale", bool(existing.get("enableAutoScale")), bool(wanted.get("enableAutoScale"))),
    ]
    if wanted.get("enableAutoScale"):
        have_bounds, want_bounds = (
            formula_bounds(existing.get("autoScaleFormula")),
            formula_bounds(wanted.get("autoScaleFormula")),
        )
        if have_bounds is not None and want_bounds is not None:
            # Formulas of this provider (of any version): what matters is what they scale, and between what.
            checks.append(("autoscale (target, slots per node, min, max)", have_bounds, want_bounds))
        else:
            checks.append(("autoScaleFormula", existing.get("autoScaleFormula"), wanted.get("autoScaleFormula")))
    else:
        checks.append(
            ("targetDedicatedNodes", existing.get("targetDedicatedNodes"), wanted.get("targetDedicatedNodes"))
        )
        checks.append(
            ("targetLowPriorityNodes", existing.get("targetLowPriorityNodes"), wanted.get("targetLowPriorityNodes"))
        )
    if wanted.get("enableInterNodeCommunication"):
        checks.append(("enableInterNodeCommunication", bool(existing.get("enableInterNodeCommunication")), True))
    return [f"{name} is {have!r}, this task wants {want!r}" for name, have, want in checks if have != want]


_GENERATED = re.compile(
    r"\$nodes = ceil\(\$tasks / (?P<slots>\d+)\);\s*"
    r"(?P<target>\$Target\w+) = max\((?P<min>\d+), min\(\$nodes, (?P<max>\d+)\)\);"
)


def formula_bounds(formula: Any) -> tuple[str, int, int, int] | None:
    """(scaled target, task slots per node, min nodes, max nodes) of a formula this provider generated."""
    match = _GENERATED.search(formula) if isinstance(formula, str) else None
    if match is None:
        return None
    return match["target"], int(match["slots"]), int(match["min"]), int(match["max"])


def formula_outdated(existing: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """The same bounds, from another version of the provider's formula (the pool keeps its own)."""
    have, want = existing.get("autoScaleFormula"), wanted.get("autoScaleFormula")
    return bool(wanted.get("enableAutoScale")) and formula_bounds(have) is not None and have != want


def images_not_prefetched(existing: Mapping[str, Any], images: Sequence[str]) -> list[str]:
    """Images of the job's tasks that an existing pool's nodes do not pre-fetch (each node pulls them)."""
    config = existing.get("virtualMachineConfiguration", {}).get("containerConfiguration") or {}
    have = {name.lower() for name in config.get("containerImageNames") or []}
    return [image for image in images if image.lower() not in have]
