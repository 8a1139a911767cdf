"""Where a job runs: an existing pool, a named shared pool created if missing, or a job-scoped auto-pool.

    BatchPool.existing("nightly-pool", requirements={"cpus": 4})         # checked: exists, VM size fits
    BatchPool.shared("gpu-a100", requirements={"gpus": 4, "gpu_kind": "A100"}, max_nodes=4)
    BatchPool.auto(requirements={"cpus": 2, "memory": "8Gi"}, max_nodes=10)   # deleted with the job

Pools this provider creates get their VM size, image, node agent and autoscale formula from the
requirements (see :mod:`airflow_provider_azbatch.compute`), or from ``vm_size=`` and ``image=``; a
``network=``, ``mounts=``, ``users=``, ``data_disks=``, a ``start_task`` (run as an administrator), a task
scheduling policy (``fill=``, ``job_order=``), ``metadata=`` and, for anything else of the Batch pool model,
``pool_overrides=``. Every setting is checked when the DAG is parsed. A pool of Spot nodes (``low_priority``)
can fall back to dedicated nodes (``spot_fallback=SpotFallback(...)``, see :mod:`.spot`).
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from airflow_provider_azbatch.compute import (
    ComputeSpecError,
    PoolImage,
    ResourceRequirements,
    load_catalog,
    named_vm_size,
    pool_spec_from_requirements,
    select_vm_size,
)
from airflow_provider_azbatch.exceptions import AzureBatchValidationError
from airflow_provider_azbatch.pools.comparison import SPEC_METADATA_KEY, with_spec_hash
from airflow_provider_azbatch.pools.disks import DataDisk, check_data_disks
from airflow_provider_azbatch.pools.errors import PoolStrategyError
from airflow_provider_azbatch.pools.mounts import LoginCredentials, Mount, StorageCredentials, check_mounts
from airflow_provider_azbatch.pools.network import PoolNetwork
from airflow_provider_azbatch.pools.overrides import AUTO_POOL_OVERRIDES, SHARED_POOL_OVERRIDES
from airflow_provider_azbatch.pools.spot import SpotFallback, check_spot_overrides
from airflow_provider_azbatch.pools.start_task import StartTask
from airflow_provider_azbatch.pools.users import PoolUser
from airflow_provider_azbatch.specs.identity import RunAs
from airflow_provider_azbatch.specs.overrides import OverrideSchema, deep_merge, find_keys
from airflow_provider_azbatch.specs.validation import did_you_mean
from airflow_provider_azbatch.specs.validation import image as check_image

__all__ = ["WINDOWS_REFUSED", "BatchPool", "PoolSecrets", "PoolStrategyError"]

Kind = Literal["existing", "shared", "auto"]
FILL_TYPES = ("spread", "pack")
JOB_ORDERS = ("none", "creationtime")
WINDOWS_REFUSED = (
    "Windows pools are not supported: this provider hands every command (tasks, coordination commands, start "
    "tasks, workspace set-up) to /bin/sh -c, which a Windows node does not have. Use a Linux pool"
)
IDENTITY_REFUSED = (
    "cannot work on a pool this provider creates: a managed identity reference needs the pool to have that "
    "identity, and the Batch data plane cannot give a pool an identity (pools with managed identities are created "
    "through ARM, Bicep or the portal). Create such a pool there and use BatchPool.existing"
)


def _requirements(value: ResourceRequirements | Mapping[str, Any] | None) -> ResourceRequirements | None:
    if value is None or isinstance(value, ResourceRequirements):
        return value
    if not isinstance(value, Mapping):
        raise PoolStrategyError(f"requirements must be ResourceRequirements or a mapping, got {type(value).__name__}")
    data = dict(value)
    known = [*(f.name for f in dataclasses.fields(ResourceRequirements)), "memory"]
    unknown = sorted(str(key) for key in data if key not in known)
    if unknown:
        named = ", ".join(f"{name!r}{did_you_mean(name, known)}" for name in unknown)
        raise PoolStrategyError(
            f"requirements has unknown key(s) {named}; known: cpus, memory (e.g. '8Gi') or memory_gib, gpus, "
            "gpu_kind, low_priority, os_image, containers"
        )
    memory = data.pop("memory", None)
    try:
        if memory is not None:
            return ResourceRequirements.with_memory(memory, **data)
        return ResourceRequirements(**data)
    except TypeError as exc:
        raise PoolStrategyError(f"requirements: {exc}") from None


def _warn_of_uncatalogued_size(vm_size: str) -> None:
    """A size the catalog does not list may be newer than the catalog, so it is not refused; a near miss of a
    listed one is most likely a typo, which Azure refuses only when the pool is created: a warning says so."""
    catalog = load_catalog()
    if not catalog.close_names(vm_size):
        return  # nothing it looks like a typo of (the run logs that the size is not in the catalog)
    message = catalog.unknown_size_message(vm_size)
    warnings.warn(
        f"{message} Azure refuses a size it does not offer when the pool is created; a size newer than the catalog "
        "is used as it is (not checked against the requirements, no cost estimate).",
        UserWarning,
        stacklevel=5,
    )


@dataclass(frozen=True)
class PoolSecrets:
    """What a pool body needs from connections, read when the task runs: one set of credentials per mount (None
    for NFS), and each user's password (None: a random one)."""

    mounts: Sequence[StorageCredentials | LoginCredentials | None] = ()
    passwords: Mapping[str, str | None] = field(default_factory=dict)


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
    start_task: StartTask | None = None
    auto_pool_prefix: str = "airflow"
    metadata: Mapping[str, str] = field(default_factory=dict)
    vm_size: str | None = None
    image: PoolImage | None = None
    network: PoolNetwork | None = None
    mounts: tuple[Mount, ...] = ()
    users: tuple[PoolUser, ...] = ()
    data_disks: tuple[DataDisk, ...] = ()
    fill: str | None = None
    job_order: str | None = None
    pool_overrides: Mapping[str, Any] = field(default_factory=dict)
    spot_fallback: SpotFallback | None = None

    @classmethod
    def existing(cls, pool_id: str, requirements: ResourceRequirements | Mapping[str, Any] | None = None) -> BatchPool:
        """A pool that must exist; with ``requirements``, its VM size is checked to fit them."""
        return cls("existing", pool_id=pool_id, requirements=_requirements(requirements))

    @classmethod
    def shared(
        cls,
        pool_id: str,
        requirements: ResourceRequirements | Mapping[str, Any] | None = None,
        *,
        max_nodes: int = 1,
        min_nodes: int = 0,
        autoscale: bool = True,
        task_slots_per_node: int | None = None,
        container_images: Sequence[str] = (),
        start_task: str | StartTask | None = None,
        vm_size: str | None = None,
        image: PoolImage | None = None,
        network: PoolNetwork | None = None,
        mounts: Sequence[Mount] = (),
        users: Sequence[PoolUser] = (),
        data_disks: Sequence[DataDisk] = (),
        fill: str | None = None,
        job_order: str | None = None,
        metadata: Mapping[str, str] | None = None,
        pool_overrides: Mapping[str, Any] | Any = None,
        spot_fallback: SpotFallback | None = None,
    ) -> BatchPool:
        """A named pool shared by DAGs: created from ``requirements`` (or ``vm_size``) if missing, reused if it
        matches everything this task would create it with."""
        return cls._declared("shared", locals())

    @classmethod
    def auto(
        cls,
        requirements: ResourceRequirements | Mapping[str, Any] | None = None,
        *,
        max_nodes: int = 1,
        min_nodes: int = 0,
        autoscale: bool = False,
        task_slots_per_node: int | None = None,
        container_images: Sequence[str] = (),
        start_task: str | StartTask | None = None,
        prefix: str = "airflow",
        vm_size: str | None = None,
        image: PoolImage | None = None,
        network: PoolNetwork | None = None,
        mounts: Sequence[Mount] = (),
        users: Sequence[PoolUser] = (),
        data_disks: Sequence[DataDisk] = (),
        fill: str | None = None,
        job_order: str | None = None,
        metadata: Mapping[str, str] | None = None,
        pool_overrides: Mapping[str, Any] | Any = None,
        spot_fallback: SpotFallback | None = None,
    ) -> BatchPool:
        """A pool made with the job and deleted when it ends (default: ``max_nodes`` fixed nodes)."""
        declared = locals()
        declared["auto_pool_prefix"] = declared.pop("prefix")
        return cls._declared("auto", declared)

    @classmethod
    def _declared(cls, kind: Kind, parameters: dict[str, Any]) -> BatchPool:
        """The pool a factory declares: each of its parameters sets the field of the same name (the sequences
        and mappings copied, the requirements read from a mapping too)."""
        fields = {name: value for name, value in parameters.items() if name != "cls"}
        return cls(
            kind,
            requirements=_requirements(fields.pop("requirements")),
            container_images=tuple(fields.pop("container_images")),
            mounts=tuple(fields.pop("mounts")),
            users=tuple(fields.pop("users")),
            data_disks=tuple(fields.pop("data_disks")),
            metadata=dict(fields.pop("metadata") or {}),
            pool_overrides=fields.pop("pool_overrides") or {},
            **fields,
        )

    def __post_init__(self) -> None:
        if self.kind in ("existing", "shared") and not self.pool_id:
            raise PoolStrategyError(f"a {self.kind} pool needs pool_id")
        if self.kind == "existing":
            return
        object.__setattr__(self, "start_task", StartTask.parse(self.start_task))
        for index, reference in enumerate(self.container_images):
            try:
                check_image(reference, f"container_images[{index}]")
            except AzureBatchValidationError as exc:
                raise PoolStrategyError(str(exc)) from None
        object.__setattr__(self, "mounts", check_mounts(self.mounts))
        object.__setattr__(self, "users", tuple(self.users))
        object.__setattr__(self, "data_disks", tuple(self.data_disks))
        if self.requirements is None and self.vm_size is None:
            raise PoolStrategyError(
                f"a {self.kind} pool needs requirements (cpus, memory, gpus...) to be sized from, or vm_size"
            )
        if self.requirements is None:
            object.__setattr__(self, "requirements", ResourceRequirements())
        try:
            if self.vm_size is not None:
                _, catalogued = named_vm_size(self.vm_size, self.requirements)  # type: ignore[arg-type]
                if not catalogued:
                    _warn_of_uncatalogued_size(self.vm_size)
            else:
                # What the run would find: no size fits these requirements (the message names the closest).
                select_vm_size(self.requirements)  # type: ignore[arg-type]
        except ComputeSpecError as exc:
            raise PoolStrategyError(str(exc)) from None
        if self.image is not None:
            if not isinstance(self.image, PoolImage):
                raise PoolStrategyError(
                    f"image must be a PoolImage (PoolImage.marketplace or PoolImage.gallery), got {self.image!r}"
                )
            if self.image.is_windows:
                raise PoolStrategyError(f"image {self.image.describe()}: {WINDOWS_REFUSED}")
        if self.network is not None:
            if not isinstance(self.network, PoolNetwork):
                raise PoolStrategyError(f"network must be a PoolNetwork, got {self.network!r}")
            self.network.check_size(self.max_nodes)
        self._check_users()
        vm = load_catalog().find(self.vm_size) if self.vm_size else None
        check_data_disks(self.data_disks, vm.max_data_disks if vm is not None else None)
        if self.fill is not None and self.fill not in FILL_TYPES:
            raise PoolStrategyError(f"fill must be 'spread' or 'pack', got {self.fill!r}")
        if self.job_order is not None and self.job_order not in JOB_ORDERS:
            raise PoolStrategyError(f"job_order must be 'none' or 'creationtime', got {self.job_order!r}")
        self._check_metadata()
        object.__setattr__(self, "pool_overrides", self.overrides(templates=True))
        self._check_spot()

    def _check_users(self) -> None:
        names: set[str] = set()
        for index, user in enumerate(self.users):
            if not isinstance(user, PoolUser):
                raise PoolStrategyError(f"users[{index}] must be a PoolUser, got {type(user).__name__} {user!r}")
            if user.name.lower() in names:
                raise PoolStrategyError(f"users[{index}]: the name {user.name!r} is given twice")
            names.add(user.name.lower())
        run_as = self.start_task.run_as if self.start_task is not None else None
        if isinstance(run_as, RunAs) and run_as.user is not None and run_as.user.lower() not in names:
            raise PoolStrategyError(
                f"start_task.run_as names the user {run_as.user!r}, which is not one of the pool's users: add "
                f"PoolUser({run_as.user!r}) to users"
            )

    def _check_spot(self) -> None:
        assert self.requirements is not None
        if self.requirements.low_priority:
            check_spot_overrides(self.pool_overrides)
        fallback = self.spot_fallback
        if fallback is None:
            return
        if not isinstance(fallback, SpotFallback):
            raise PoolStrategyError(f"spot_fallback must be a SpotFallback, got {fallback!r}")
        if not self.requirements.low_priority:
            raise PoolStrategyError(
                "spot_fallback is for pools of Spot nodes: add low_priority=True to the requirements, or leave "
                "spot_fallback out"
            )
        if self.kind == "auto" and fallback.dedicated_pool_id is not None:
            raise PoolStrategyError(
                "spot_fallback.dedicated_pool_id is for shared pools: a job's own pool is turned to dedicated nodes"
            )
        if self.kind == "shared":
            assert self.pool_id is not None
            fallback.dedicated_pool_for(self.pool_id)

    def dedicated_twin(self) -> BatchPool:
        """The pool of dedicated nodes a shared Spot pool's jobs fall back to: made like it, with dedicated nodes,
        autoscaled from zero (a fallback is for a while: it gives its nodes back once the work is done)."""
        assert self.spot_fallback is not None
        assert self.pool_id is not None
        assert self.requirements is not None
        return dataclasses.replace(
            self,
            pool_id=self.spot_fallback.dedicated_pool_for(self.pool_id),
            requirements=dataclasses.replace(self.requirements, low_priority=False),
            autoscale=True,
            min_nodes=0,
            spot_fallback=None,
        )

    def _check_metadata(self) -> None:
        if not isinstance(self.metadata, Mapping):
            raise PoolStrategyError(f"metadata must be a mapping of names to strings, got {self.metadata!r}")
        for name, value in self.metadata.items():
            if not isinstance(name, str) or not name.strip() or not isinstance(value, str):
                raise PoolStrategyError(f"metadata[{name!r}] must be a non-empty name with a string value")
            if name == SPEC_METADATA_KEY:
                raise PoolStrategyError(f"metadata[{name!r}] is set by the provider itself: use another name")

    @property
    def override_schema(self) -> OverrideSchema:
        return SHARED_POOL_OVERRIDES if self.kind == "shared" else AUTO_POOL_OVERRIDES

    def overrides(self, *, templates: bool = False) -> dict[str, Any]:
        """``pool_overrides`` checked (``templates``: at parse time, values holding a template wait for the run)."""
        try:
            checked = self.override_schema.check(self.pool_overrides, "pool_overrides", templates=templates)
        except AzureBatchValidationError as exc:
            raise PoolStrategyError(str(exc)) from None
        for path in find_keys(checked, "identityReference"):
            raise PoolStrategyError(f"pool_overrides.{path} {IDENTITY_REFUSED}")
        if not self.autoscale:
            for name in ("autoScaleFormula", "autoScaleEvaluationInterval"):
                if name in checked:
                    raise PoolStrategyError(f"pool_overrides.{name} needs autoscale=True")
        return checked

    def user_names(self) -> set[str]:
        return {user.name.lower() for user in self.users}

    def pool_body(
        self,
        *,
        containers: bool,
        multi_node: int,
        registries: Sequence[Mapping[str, Any]] = (),
        task_images: Sequence[str] = (),
        secrets: PoolSecrets | None = None,
    ) -> dict[str, Any]:
        """REST fields of the pool to create (without ``id``), for tasks needing up to ``multi_node`` nodes, with
        its specification hash in its metadata.

        Its nodes pre-fetch ``task_images`` (the images of the tasks it is created for) besides the
        strategy's own ``container_images``, so no task waits for a pull on a paid node.
        """
        assert self.requirements is not None
        secrets = secrets or PoolSecrets()
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
        try:
            spec = pool_spec_from_requirements(
                requirements,
                max_nodes=self.max_nodes,
                min_nodes=self.min_nodes,
                # A multi-node task needs all its nodes at once: the formula's floor while anything is pending.
                multi_node=multi_node,
                autoscale=self.autoscale,
                # The service runs multi-node tasks only on pools with one task slot per node.
                task_slots_per_node=1 if multi_node > 1 else self.task_slots_per_node,
                container_images=tuple(dict.fromkeys([*self.container_images, *task_images])),
                vm_size=self.vm_size,
                image=self.image,
            )
        except ComputeSpecError as exc:
            raise PoolStrategyError(str(exc)) from None
        body = spec.to_rest()
        vm_config = body["virtualMachineConfiguration"]
        if multi_node > 1:
            body["enableInterNodeCommunication"] = True
        if registries and "containerConfiguration" in vm_config:
            vm_config["containerConfiguration"]["containerRegistries"] = list(registries)
        if self.data_disks:
            vm_config["dataDisks"] = [disk.to_rest() for disk in self.data_disks]
        if self.start_task is not None:
            body["startTask"] = self.start_task.to_rest()
        if self.network is not None and self.network.to_rest():
            body["networkConfiguration"] = self.network.to_rest()
        if self.mounts:
            credentials = [*secrets.mounts, *([None] * (len(self.mounts) - len(secrets.mounts)))]
            body["mountConfiguration"] = [
                mount.to_rest(credentials[index])  # type: ignore[arg-type]
                for index, mount in enumerate(self.mounts)
            ]
        if self.users:
            body["userAccounts"] = [user.to_rest(secrets.passwords.get(user.name)) for user in self.users]
        policy = {
            name: value for name, value in (("nodeFillType", self.fill), ("jobDefaultOrder", self.job_order)) if value
        }
        if policy:
            # The service requires nodeFillType in a policy; spread is its default.
            body["taskSchedulingPolicy"] = {"nodeFillType": "spread", **policy}
        if self.metadata:
            body["metadata"] = [{"name": name, "value": value} for name, value in self.metadata.items()]
        body = deep_merge(body, self.overrides())
        return with_spec_hash(body)
