"""The pools a run would use: read from a DAG file's Batch tasks, or from ``BatchPool`` values given directly.

For a pool the provider creates (shared or auto), the VM size, image and node agent are those the run would
send: the pool body is built exactly as the task builds it (``BatchPool.pool_body``), from the task's own
multi-node count and container images. No I/O: the DAG file is parsed as the DAG processor parses it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_provider_azbatch.pools.errors import PoolStrategyError
from airflow_provider_azbatch.pools.ready import task_images
from airflow_provider_azbatch.pools.strategy import BatchPool
from airflow_provider_azbatch.submission.request import JobRequest, holds_template

if TYPE_CHECKING:
    from airflow_provider_azbatch.operators.job import AzureBatchJobOperator


@dataclass(frozen=True)
class PoolTarget:
    """One pool a run needs: an existing one (``pool_id``), or one the provider creates, with what it is made of."""

    label: str
    kind: str
    pool_id: str | None = None
    vm_size: str | None = None
    image: dict[str, str] = field(default_factory=dict)
    node_agent: str | None = None
    max_nodes: int = 1
    low_priority: bool = False
    # The virtual network subnet its nodes join (networkConfiguration.subnetId), if any.
    subnet_id: str | None = None
    # Why the pool cannot be known before the run (a template, a TorchX app's roles), or cannot be made at all.
    unknown_because: str | None = None
    problem: str | None = None

    @property
    def key(self) -> tuple[Any, ...]:
        """Pools made the same way are checked once."""
        image = tuple(sorted(self.image.items()))
        return (
            self.kind,
            self.pool_id,
            self.vm_size,
            image,
            self.node_agent,
            self.max_nodes,
            self.low_priority,
            self.subnet_id,
        )


@dataclass
class Targets:
    """What a DAG file (or the pools given) asks of the account."""

    pools: list[PoolTarget] = field(default_factory=list)
    # Tasks that need the connection's storage account (workspaces, @task.azure_batch, Blob inputs/outputs/logs).
    storage_users: list[str] = field(default_factory=list)
    batch_tasks: int = 0


def pool_target(
    strategy: BatchPool, label: str, *, containers: bool = False, multi_node: int = 1, images: Sequence[str] = ()
) -> PoolTarget:
    """The pool ``strategy`` stands for, as a task with ``multi_node`` nodes per task and ``images`` would make it."""
    if strategy.kind == "existing":
        return PoolTarget(label, "existing", pool_id=strategy.pool_id)
    requirements = strategy.requirements
    low_priority = bool(requirements is not None and requirements.low_priority)
    try:
        body = strategy.pool_body(containers=containers, multi_node=multi_node, task_images=list(images))
    except PoolStrategyError as exc:
        if holds_template(strategy.pool_overrides):
            return PoolTarget(
                label, strategy.kind, strategy.pool_id, unknown_because="its pool_overrides hold a template"
            )
        return PoolTarget(label, strategy.kind, strategy.pool_id, problem=str(exc))
    vm_config = body["virtualMachineConfiguration"]
    return PoolTarget(
        label,
        strategy.kind,
        strategy.pool_id,
        vm_size=str(body["vmSize"]).lower(),
        image=dict(vm_config["imageReference"]),
        node_agent=str(vm_config["nodeAgentSKUId"]),
        max_nodes=strategy.max_nodes,
        low_priority=low_priority,
        subnet_id=(body.get("networkConfiguration") or {}).get("subnetId"),
    )


def targets_of_pools(pools: Iterable[BatchPool] | Mapping[str, BatchPool]) -> Targets:
    """``pools`` as a list (labelled by pool id or position) or a mapping of labels to pools."""
    found = Targets()
    labelled = pools.items() if isinstance(pools, Mapping) else ((None, pool) for pool in pools)
    for index, (label, strategy) in enumerate(labelled):
        if not isinstance(strategy, BatchPool):
            raise TypeError(f"pools[{index}] must be a BatchPool, got {type(strategy).__name__}")
        if label is None:
            label = f"pool '{strategy.pool_id}'" if strategy.pool_id else f"pools[{index}]"
        found.pools.append(pool_target(strategy, label))
    return found


def targets_of_dags(dags: Iterable[Any]) -> Targets:
    """The pools and storage needs of every Batch task of ``dags`` (pools made alike merged, their labels joined)."""
    from airflow_provider_azbatch.operators.job import AzureBatchJobOperator

    found = Targets()
    by_key: dict[tuple[Any, ...], PoolTarget] = {}
    for dag in dags:
        for task in sorted(dag.tasks, key=lambda task: task.task_id):
            label = f"{dag.dag_id}.{task.task_id}"
            operator = _batch_operator(task, AzureBatchJobOperator)
            if operator is None:
                continue
            found.batch_tasks += 1
            target, needs_storage = _task_target(operator, task, label)
            if needs_storage:
                found.storage_users.append(label)
            known = target.problem is None and target.unknown_because is None
            key = target.key if known else ("task", label)
            merged = by_key.get(key)
            by_key[key] = dataclasses.replace(merged, label=f"{merged.label}, {label}") if merged else target
    found.pools = list(by_key.values())
    return found


def _batch_operator(
    task: object, base: type[AzureBatchJobOperator]
) -> AzureBatchJobOperator | type[AzureBatchJobOperator] | None:
    """The task itself if it is a Batch job operator (or TaskFlow's), its class for a mapped one, else None."""
    if isinstance(task, base):
        return task
    operator_class = getattr(task, "operator_class", None)  # a mapped task (.partial().expand())
    if isinstance(operator_class, type) and issubclass(operator_class, base):
        return operator_class
    return None


def _task_target(
    operator: AzureBatchJobOperator | type[AzureBatchJobOperator], task: object, label: str
) -> tuple[PoolTarget, bool]:
    if isinstance(operator, type):  # mapped: only what .partial() fixed is known before the run
        kwargs = dict(getattr(task, "partial_kwargs", {}) or {})
        strategy = kwargs.get("batch_pool")
        if strategy is None and kwargs.get("pool_id"):
            strategy = BatchPool.existing(str(kwargs["pool_id"]))
        if not isinstance(strategy, BatchPool):
            return PoolTarget(label, "mapped", unknown_because="a mapped task whose pool is given per instance"), False
        needs = bool(kwargs.get("workspace") or kwargs.get("inputs") or kwargs.get("outputs"))
        return pool_target(strategy, label), needs or bool(kwargs.get("output_container"))
    if getattr(operator, "_pool_from_app", False):
        return PoolTarget(
            label, "auto", unknown_because="the pool is made from the TorchX app's roles when the task runs"
        ), bool(operator.workspace)
    request: JobRequest = operator.job_request()
    needs_storage = bool(
        request.workspace
        or request.blob.inputs
        or request.blob.outputs
        or request.blob.output_container
        or getattr(operator, "python_callable", None) is not None  # @task.azure_batch stages its call in Blob
    )
    multi_node, images = 1, []
    if not holds_template((request.command, request.tasks, request.fan_out, request.coordination_command)):
        specs = request.specs()
        multi_node = max((spec.num_nodes for spec in specs), default=request.num_nodes)
        job_image = request.containers.image if not holds_template(request.containers.image) else None
        images = task_images(specs, job_image)
    return pool_target(
        request.pool, label, containers=bool(images), multi_node=multi_node, images=images
    ), needs_storage
