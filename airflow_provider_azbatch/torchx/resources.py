"""A TorchX app's resources as the pools it runs on: what each role needs of a node, which VM size that is, and
whether one pool (of one size) runs every role or a pool per size does. No I/O.

Resources pick the pool's VM size through :mod:`airflow_provider_azbatch.compute`: one pool serves every role, so
its nodes must satisfy the largest of them, unless roles name different VM sizes: then a pool (and a Batch job) per
size (:func:`pool_parts`); a role no size satisfies is refused naming the role. ``max_nodes`` must hold every role
of a pool at once.
"""

from __future__ import annotations

from torchx.specs import AppDef, Resource, Role

from airflow_provider_azbatch.compute import (
    ComputeSpecError,
    ResourceRequirements,
    VmSize,
    fits,
    load_catalog,
    named_vm_size,
    pool_spec_from_requirements,
    select_vm_size,
)
from airflow_provider_azbatch.exceptions import AzureBatchValidationError
from airflow_provider_azbatch.pools.strategy import BatchPool, PoolStrategyError
from airflow_provider_azbatch.torchx.options import AzureBatchOpts, TorchXOptionError

# Resource.capabilities the scheduler understands.
CAPABILITIES = ("vm_size", "gpu_kind", "low_priority", "os_image", "infiniband")
# An app runs on at most this many pools (one job each: <job id>, <job id>-p2 ... -p9).
MAX_POOLS = 9


def requirements_of(role: Role) -> tuple[ResourceRequirements, str | None]:
    """(what one replica needs of a node, a VM size the role names); refused naming the role."""
    resource: Resource = role.resource
    where = f"role '{role.name}' resource"
    unknown = sorted(key for key in resource.capabilities if key not in CAPABILITIES)
    if unknown:
        raise AzureBatchValidationError(
            f"{where}.capabilities",
            f"has {', '.join(unknown)}, which Azure Batch does not understand: use {', '.join(CAPABILITIES)}",
        )
    if resource.devices:
        raise AzureBatchValidationError(
            f"{where}.devices",
            f"asks for {', '.join(sorted(resource.devices))}: Azure Batch gives a task a whole VM, not devices; "
            "ask for gpus, or a vm_size capability with the hardware",
        )
    caps = resource.capabilities
    cpus = resource.cpu if resource.cpu > 0 else 1
    memory_gib = resource.memMB / 1024 if resource.memMB > 0 else 1
    gpus = resource.gpu if resource.gpu > 0 else 0
    try:
        requirements = ResourceRequirements(
            cpus=cpus,
            memory_gib=memory_gib,
            gpus=gpus,
            gpu_kind=caps.get("gpu_kind"),
            low_priority=bool(caps.get("low_priority", False)),
            **({"os_image": caps["os_image"]} if "os_image" in caps else {}),
        )
    except ComputeSpecError as exc:
        raise AzureBatchValidationError(where, str(exc)) from None
    vm_size = caps.get("vm_size")
    return requirements, str(vm_size) if vm_size else None


def _fits_some_size(role: Role, requirements: ResourceRequirements, vm_size: str | None) -> None:
    try:
        pool_spec_from_requirements(requirements, max_nodes=max(role.num_replicas, 1), vm_size=vm_size)
    except ComputeSpecError as exc:
        raise AzureBatchValidationError(
            f"role '{role.name}' resource",
            f"(cpu={role.resource.cpu}, memMB={role.resource.memMB}, gpu={role.resource.gpu}) cannot run on Azure "
            f"Batch: {exc}. Ask for less (the component's resource arguments, e.g. -h or --cpu/--memMB), or name "
            "a VM size that has it (-cfg vm_size=...)",
        ) from None


def pool_of(app: AppDef, opts: AzureBatchOpts) -> BatchPool:
    """The app's pool: an existing one, a shared one, or one made for it from its roles' resources."""
    if opts.pool_id and opts.shared_pool:
        raise TorchXOptionError("shared_pool", "cannot be given with pool_id: give one of them")
    sizes = [requirements_of(role) for role in app.roles]
    for role, (requirements, vm_size) in zip(app.roles, sizes, strict=True):
        _fits_some_size(role, requirements, opts.vm_size or vm_size)
    named = {vm_size.lower() for _, vm_size in sizes if vm_size}
    if len(named) > 1 and not opts.vm_size:
        given = "pool_id" if opts.pool_id else "shared_pool" if opts.shared_pool else None
        raise AzureBatchValidationError(
            "resource.capabilities.vm_size",
            f"differs between roles ({', '.join(sorted(named))}): "
            + (
                f"{given} is one pool, of one size; leave it out (each size then gets a pool made for the app)"
                if given
                else "one job runs on one pool, of one size: run the app with the torchx command (a job per size)"
            ),
        )
    kinds = {req.gpu_kind for req, _ in sizes if req.gpu_kind}
    if len(kinds) > 1:
        raise AzureBatchValidationError(
            "resource.capabilities.gpu_kind", f"differs between roles ({', '.join(sorted(kinds))}): one pool runs them"
        )
    # One pool runs every role: its nodes fit the largest.
    combined = ResourceRequirements(
        cpus=max(req.cpus for req, _ in sizes),
        memory_gib=max(req.memory_gib for req, _ in sizes),
        gpus=max(req.gpus for req, _ in sizes),
        gpu_kind=next(iter(kinds), None),
        low_priority=opts.low_priority or any(req.low_priority for req, _ in sizes),
        os_image=sizes[0][0].os_image,
    )
    vm_size = opts.vm_size or next(iter(named), None)
    # Every role runs at once (a replica a node): the pool must hold all of them, or the roles wait on each other.
    replicas = sum(role.num_replicas for role in app.roles)
    max_nodes = opts.max_nodes if opts.max_nodes is not None else replicas
    if max_nodes < replicas:
        counts = " + ".join(f"{role.num_replicas} ({role.name})" for role in app.roles)
        raise TorchXOptionError(
            "max_nodes",
            f"is {max_nodes}, but the app's roles run at once, one node per replica: {counts} = {replicas} nodes; "
            f"raise it to {replicas} or more",
        )
    try:
        if opts.pool_id:
            return BatchPool.existing(opts.pool_id, requirements=combined if vm_size is None else None)
        if opts.shared_pool:
            return BatchPool.shared(
                opts.shared_pool, combined, max_nodes=max_nodes, autoscale=opts.autoscale, vm_size=vm_size
            )
        return BatchPool.auto(combined, max_nodes=max_nodes, vm_size=vm_size, prefix="torchx")
    except PoolStrategyError as exc:
        raise AzureBatchValidationError("pool", str(exc)) from None


def pool_parts(app: AppDef, opts: AzureBatchOpts) -> list[list[int]]:
    """The roles (their indices) of each pool: one pool, unless roles name different VM sizes (a resource's
    vm_size, or an Azure named resource) and the pools are made for the app; then a pool per size, and a role
    naming none goes to the cheapest of them that fits it."""
    sized = [requirements_of(role) for role in app.roles]
    distinct = list(dict.fromkeys(vm_size.lower() for _, vm_size in sized if vm_size))
    if opts.vm_size or opts.pool_id or opts.shared_pool or len(distinct) < 2:
        return [list(range(len(app.roles)))]
    if len(distinct) > MAX_POOLS:
        raise AzureBatchValidationError(
            "resource.capabilities.vm_size",
            f"names {len(distinct)} VM sizes across the roles: an app runs on at most {MAX_POOLS} pools",
        )
    catalog = load_catalog()
    parts: dict[str, list[int]] = {size: [] for size in distinct}
    for index, (role, (requirements, vm_size)) in enumerate(zip(app.roles, sized, strict=True)):
        if vm_size:
            parts[vm_size.lower()].append(index)
            continue
        fitting = [vm for size in distinct if (vm := catalog.find(size)) is not None and fits(vm, requirements)]
        if not fitting:
            raise AzureBatchValidationError(
                f"role '{role.name}' resource",
                f"names no VM size, and none of the other roles' sizes ({', '.join(distinct)}) fits it "
                f"({requirements.describe()}): name its size (-h azure_<size>, or the vm_size capability)",
            )
        parts[min(fitting, key=lambda vm: vm.hourly_usd).name].append(index)
    return list(parts.values())


def node_size(pool: BatchPool, opts: AzureBatchOpts) -> VmSize | None:
    """The VM size of the app's nodes when it is known before anything is read from Batch: a pool made for the
    app (or a shared one) from its resources or vm_size; an existing pool's only when vm_size names it."""
    if pool.kind == "existing" or pool.requirements is None:
        return load_catalog().find(opts.vm_size) if opts.vm_size else None
    try:
        if pool.vm_size:
            return named_vm_size(pool.vm_size, pool.requirements)[0]
        return select_vm_size(pool.requirements)
    except ComputeSpecError:
        return None
