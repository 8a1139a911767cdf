"""A TorchX AppDef as the operator's :class:`~airflow_provider_azbatch.submission.request.JobRequest`.

- Each role is one Batch task (its id from the role's name, its display name the name itself); a role with
  ``num_replicas > 1`` is a multi-instance task: the primary node runs replica 0 as the task's command, and
  the coordination command starts the role on every other node in the background. Every replica runs under the
  node wrapper (:mod:`.node`: which replica a node runs, its record, restarts, the time of its output) with its
  own macros: ``replica_id``, ``app_id`` (the full app id, as in ``TORCHX_JOB_ID``), ``rank0_env`` =
  ``TORCHX_RANK0_HOST``, which holds the primary's bare address (``AZ_BATCH_MASTER_NODE`` without its port;
  ``localhost`` for a single replica).
- The job fails fast: the first role (or replica 0) that fails after its retries ends it (Batch's own
  ``fail_fast``); a replica other than 0 is seen failing by ``describe``, which ends the job then.
- Commands are quoted (``shlex``) and handed to ``/bin/sh -c`` by the provider: Batch runs no shell itself.
- Resources pick the pool's VM size through :mod:`airflow_provider_azbatch.compute`: one pool serves every role,
  so its nodes must satisfy the largest of them, unless roles name different VM sizes: then a pool (and a Batch
  job) per size (:func:`job_requests`); a role no size satisfies is refused naming the role. ``max_nodes`` must
  hold every role of a pool at once.
- Each role's container gets its bind and device mounts, a ``/dev/shm`` for DataLoader workers, InfiniBand's
  devices and limits when it asks (checked against the VM size), and the app's and its own run options
  (:func:`container_setup`).
- ``env``, ``max_retries`` (the task's retries; with ``RetryPolicy.REPLICA`` on several replicas, each replica's
  restarts in place), ``metadata`` (the job's) are expressed; what Batch cannot express is refused before
  anything is submitted.
- With the output kept (a storage account, ``log_container``), replica 0's record is uploaded with its output,
  and the other replicas' by the job release task.
"""

from __future__ import annotations

import json
import re
import secrets
import shlex
import string
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from torchx.specs import AppDef, BindMount, DeviceMount, Resource, RetryPolicy, Role, macros

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
from airflow_provider_azbatch.hooks.storage import LogLocation
from airflow_provider_azbatch.pools.strategy import BatchPool, PoolStrategyError
from airflow_provider_azbatch.specs.blob_io import OutputSpec
from airflow_provider_azbatch.specs.container_runtime import (
    HOST_IPC,
    INFINIBAND_ENVIRONMENT,
    ContainerRuntimeError,
    check_infiniband,
    half_of_memory,
    infiniband_options,
    join_options,
    sets_shared_memory,
    shm_option,
)
from airflow_provider_azbatch.specs.job_side_tasks import PREPARATION, RELEASE, JobSideTask
from airflow_provider_azbatch.specs.options import BlobOptions, ContainerOptions
from airflow_provider_azbatch.specs.validation import MAX_ID_LENGTH
from airflow_provider_azbatch.specs.workspace import Workspace
from airflow_provider_azbatch.submission.request import JobRequest
from airflow_provider_azbatch.torchx import node
from airflow_provider_azbatch.torchx.names import (
    ALL_USERS,
    APP_METADATA_KEY,
    JOB_ID_PREFIX,
    JOBS_METADATA_KEY,
    PART_OF_METADATA_KEY,
    ROLES_METADATA_KEY,
    USER_METADATA_KEY,
    current_user,
)
from airflow_provider_azbatch.torchx.node import RANK0_ENV
from airflow_provider_azbatch.torchx.options import AzureBatchOpts, TorchXOptionError

# Resource.capabilities the scheduler understands.
CAPABILITIES = ("vm_size", "gpu_kind", "low_priority", "os_image", "infiniband")
# Role metadata the scheduler reads: the role's own container run options and /dev/shm size.
RUN_OPTIONS_METADATA = "azure_batch/container_run_options"
SHM_SIZE_METADATA = "azure_batch/shm_size"
# shm_size's default: half the node's memory (see container_runtime); "none": Docker's own 64 MB.
AUTO_SHM, NO_SHM = "auto", "none"
# Where the output is kept in the log container: <prefix>/<job>/<task>/ (LogLocation).
LOGS_PREFIX = "torchx"
# The app's jobs after the first (one per pool of another VM size): <job id>-p2 ... -p9.
PART_SUFFIX = "-p9"
MAX_POOLS = 9


def new_job_id(app_name: str) -> str:
    """``torchx-<app name>-<random>``: unique, and found by `torchx list` through its prefix; short enough for
    the ids of the app's other jobs (:func:`part_job_id`)."""
    suffix = "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(10))
    head = _clean(app_name, MAX_ID_LENGTH - len(PART_SUFFIX) - len(JOB_ID_PREFIX) - len(suffix) - 1) or "app"
    return f"{JOB_ID_PREFIX}{head}-{suffix}"


def _clean(name: str, limit: int) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-")[:limit].strip("-")


def task_ids(roles: list[Role]) -> list[str]:
    """A Batch task id per role, unique without case (the service compares ids so)."""
    ids: list[str] = []
    for index, role in enumerate(roles):
        task_id = _clean(role.name, MAX_ID_LENGTH) or f"role-{index}"
        if task_id.lower() in {seen.lower() for seen in ids}:
            task_id = f"{task_id[: MAX_ID_LENGTH - 4]}-{index}"
        ids.append(task_id)
    return ids


# -- resources ---------------------------------------------------------------------------------------------
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


def part_job_id(job_id: str, part: int) -> str:
    """The id of the app's job on its ``part``-th pool (0: the app's own id)."""
    return job_id if part == 0 else f"{job_id}-p{part + 1}"


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


def wants_infiniband(role: Role, opts: AzureBatchOpts) -> bool:
    return opts.infiniband or bool(role.resource.capabilities.get("infiniband", False))


def container_setup(role: Role, opts: AzureBatchOpts, vm: VmSize | None) -> tuple[str | None, dict[str, str]]:
    """(the role's container run options, the variables they need): mounts, ``/dev/shm``, InfiniBand, then the
    app's and the role's own options (which win where Docker takes one value)."""
    where = f"role '{role.name}'"
    own = role.metadata.get(RUN_OPTIONS_METADATA)
    if own is not None and not isinstance(own, str):
        raise AzureBatchValidationError(
            f"{where} metadata[{RUN_OPTIONS_METADATA!r}]", f"must be a string of docker create options, got {own!r}"
        )
    given = join_options(opts.container_run_options, own)
    environment: dict[str, str] = {}
    infiniband = None
    if wants_infiniband(role, opts):
        try:
            check_infiniband(vm)
        except ContainerRuntimeError as exc:
            problem = f"{exc} (-cfg vm_size=, or a resource such as -h azure_nd96asr_v4)"
            if opts.infiniband:
                raise TorchXOptionError("infiniband", problem) from None
            raise AzureBatchValidationError(f"{where} resource.capabilities.infiniband", problem) from None
        infiniband = infiniband_options()
        environment.update(INFINIBAND_ENVIRONMENT)
    shm = None if sets_shared_memory(given) else _shm(role, opts, vm)
    return join_options(_mount_options(role), shm, infiniband, given), environment


def _shm(role: Role, opts: AzureBatchOpts, vm: VmSize | None) -> str | None:
    """The role's ``/dev/shm`` option: its metadata's size, else the run option's."""
    size = role.metadata.get(SHM_SIZE_METADATA, opts.shm_size)
    text = str(size).strip().lower() if size is not None else NO_SHM
    if text in (NO_SHM, ""):
        return None
    if text == AUTO_SHM:
        if vm is not None and vm.memory_gib:
            return shm_option(half_of_memory(vm))
        if role.resource.memMB > 0:
            return shm_option(f"{max(1, role.resource.memMB // 2)}m")
        # Nothing says how much memory the node has: share the node's own /dev/shm.
        return shm_option(HOST_IPC)
    try:
        return shm_option(text)
    except ContainerRuntimeError as exc:
        problem = f"{exc}; or {AUTO_SHM} (half the node's memory), or {NO_SHM} (Docker's 64 MB)"
        if SHM_SIZE_METADATA in role.metadata:
            raise AzureBatchValidationError(f"role '{role.name}' metadata[{SHM_SIZE_METADATA!r}]", problem) from None
        raise TorchXOptionError("shm_size", problem) from None


# -- commands ----------------------------------------------------------------------------------------------
def _replica_role(role: Role, app_id: str, replica: int) -> Role:
    return macros.Values(img_root="", app_id=app_id, replica_id=str(replica), rank0_env=RANK0_ENV).apply(role)


def role_task(
    role: Role,
    task_id: str,
    app_id: str,
    *,
    workspace: Workspace | None,
    containers: bool,
    single_role: bool,
    records: OutputSpec | None = None,
    run_options: str | None = None,
    environment: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The role as one Batch task (a multi-instance task for several replicas); each replica runs under the
    node wrapper (:mod:`.node`). ``records``: where replica 0's record and time index are uploaded;
    ``run_options`` and ``environment``: its container's (:func:`container_setup`), the role's env winning."""
    _check_role(role, single_role)
    replicas = [_replica_role(role, app_id, index) for index in range(role.num_replicas)]
    # Variables every replica has alike go to the task; those the replica_id macro makes differ are exported.
    common = {name: value for name, value in replicas[0].env.items() if all(r.env.get(name) == value for r in replicas)}
    own = [
        ({name: value for name, value in replica.env.items() if name not in common}, replica.entrypoint, replica.args)
        for replica in replicas
    ]
    multi = role.num_replicas > 1
    # REPLICA: each replica restarts in place on its node; otherwise Batch retries the role's task.
    in_place = multi and role.retry_policy == RetryPolicy.REPLICA
    restarts = role.max_retries if in_place else 0
    shipped = workspace is not None
    if multi:
        command = node.primary_command(*own[0], workspace=shipped, restarts=restarts)
    else:
        command = node.single_node_command(*own[0], workspace=shipped, restarts=restarts)
    spec: dict[str, Any] = {
        "id": task_id,
        "command_line": command,
        "display_name": role.name,
        "environment": {**(environment or {}), **common},
        "num_nodes": role.num_replicas,
    }
    if containers and role.image:
        spec["image"] = role.image
        if run_options:
            spec["container_run_options"] = run_options
    elif role.mounts:
        raise AzureBatchValidationError(
            f"role '{role.name}' mounts", "apply to a role's container: leave containers=True (the default)"
        )
    if role.max_retries and not in_place:
        spec["max_retries"] = role.max_retries
    if workspace is not None:
        spec["workspace"] = workspace
    if records is not None:
        spec["outputs"] = [records]
    if multi:
        spec["coordination_command"] = node.coordination_command(own[1:], workspace=shipped, restarts=restarts)
    return spec


def _check_role(role: Role, single_role: bool) -> None:
    where = f"role '{role.name}'"
    if role.min_replicas is not None and role.min_replicas != role.num_replicas:
        raise AzureBatchValidationError(
            f"{where} min_replicas",
            f"is {role.min_replicas} with num_replicas={role.num_replicas}: Azure Batch runs a fixed number of "
            "replicas, not an elastic range; give one number (e.g. -j 2x1, not -j 1:2x1)",
        )
    if role.retry_policy == RetryPolicy.APPLICATION and not single_role and role.max_retries:
        raise AzureBatchValidationError(
            f"{where} retry_policy",
            "is APPLICATION (TorchX's default) with max_retries: Azure Batch cannot restart an app of several "
            "roles as a whole, only each role's task by itself; use RetryPolicy.ROLE (the role restarts on all its "
            "nodes) or RetryPolicy.REPLICA (a replica restarts on its node), or max_retries=0",
        )


def _mount_options(role: Role) -> str:
    options = []
    for index, mount in enumerate(role.mounts):
        if isinstance(mount, BindMount):
            target = f"{mount.src_path}:{mount.dst_path}" + (":ro" if mount.read_only else "")
            options.append(f"--volume {shlex.quote(target)}")
        elif isinstance(mount, DeviceMount):
            options.append(f"--device {shlex.quote(f'{mount.src_path}:{mount.dst_path}:{mount.permissions}')}")
        else:
            raise AzureBatchValidationError(
                f"role '{role.name}' mounts[{index}]",
                f"is a {type(mount).__name__}: Azure Batch mounts storage on the pool, not per task. Run on a pool "
                "with the mount (pool_id=, its mountConfiguration) and bind its directory under "
                "$AZ_BATCH_NODE_MOUNTS_DIR with a BindMount",
            )
    return " ".join(options)


# -- the whole app -----------------------------------------------------------------------------------------
def role_workspace(role: Role, ship: bool, note: Callable[[str], None], *, skip: bool = False) -> Workspace | None:
    """The provider's workspace for the role's torchx workspace: one local directory, shipped through Blob.

    ``ship``: the account can ship it (it has a storage account); if not, the app is refused, unless ``skip``
    (the user chose to run without it: a note says so before anything is submitted)."""
    workspace = role.workspace
    if not workspace:
        return None
    if not workspace.is_unmapped_single_project():
        raise AzureBatchValidationError(
            f"role '{role.name}' workspace",
            f"maps several directories ({', '.join(workspace.projects)}): the azure_batch scheduler ships one "
            "directory; give one (--workspace DIR)",
        )
    path = next(iter(workspace.projects))
    if not ship:
        if not skip:
            raise TorchXOptionError(
                "skip_workspace",
                f"is off, and role '{role.name}' has the workspace {path}, which cannot reach the nodes: the Batch "
                "account has no storage account to stage it in (give the connection storage_account_url). Run "
                "without a workspace (--workspace ''), or without this one, saying so (-cfg skip_workspace=True)",
            )
        note(
            f"Role '{role.name}' runs without its workspace {path} (skip_workspace): the Batch account has no "
            "storage account to stage it in; the role has only its image's files"
        )
        return None
    return Workspace(path)


def job_request(
    app: AppDef,
    opts: AzureBatchOpts,
    *,
    job_id: str,
    app_id: str,
    has_storage: bool,
    note: Callable[[str], None],
    workspace: Workspace | None = None,
    user: str | None = None,
    part: _Part | None = None,
) -> JobRequest:
    """The Batch job of the app, checked as the operator's requests are (nothing submitted, no I/O).

    ``has_storage``: the account has a storage account (workspaces are shipped and logs kept there);
    ``workspace``: one for every role (a DAG's), over the roles' own; ``user``: who it is run for (default: the
    ``user`` option, else this process's login name), kept in the job's metadata for ``torchx list``;
    ``part``: ``app`` is the roles of one of the app's pools (:func:`job_requests`).
    """
    if not app.roles:
        raise AzureBatchValidationError("app", f"'{app.name}' has no roles")
    pool = pool_of(app, opts)
    vm = node_size(pool, opts)
    setups = [container_setup(role, opts, vm) for role in app.roles]
    ids = part.task_ids if part is not None else task_ids(app.roles)
    keep_logs = has_storage and bool(opts.log_container)
    location = LogLocation(opts.log_container, LOGS_PREFIX) if keep_logs else None
    tasks = [
        role_task(
            role,
            task_id,
            app_id,
            workspace=workspace or role_workspace(role, has_storage, note, skip=opts.skip_workspace),
            containers=opts.containers,
            single_role=part.single_role if part is not None else len(app.roles) == 1,
            records=_records(location, job_id, task_id),
            run_options=run_options,
            environment=environment,
        )
        for role, task_id, (run_options, environment) in zip(app.roles, ids, setups, strict=True)
    ]
    roles = [
        [role.name, task_id, role.num_replicas, role.entrypoint] for role, task_id in zip(app.roles, ids, strict=True)
    ]
    user = user or opts.user or current_user()
    if user == ALL_USERS:
        raise TorchXOptionError("user", f"is '{ALL_USERS}', which only torchx list takes: name one user")
    metadata = {
        **app.metadata,
        APP_METADATA_KEY: app.name,
        ROLES_METADATA_KEY: json.dumps(roles),
        USER_METADATA_KEY: user,
        **(part.metadata if part is not None else {}),
    }
    if not keep_logs and pool.kind == "auto":
        note(
            "The output is not kept after the app ends: its pool goes with it, and "
            + ("log_container is empty" if has_storage else "the Batch account has no storage account to keep it in")
            + "; torchx log reads it while the app runs"
        )
    # The other replicas' output and records, uploaded from their nodes when the job ends (see .node).
    preparation = release = None
    if keep_logs and any(role.num_replicas > 1 for role in app.roles):
        preparation = JobSideTask(PREPARATION, node.PREPARATION_COMMAND)
        release = JobSideTask(RELEASE, node.RELEASE_COMMAND, log_upload=True)
    if opts.priority is not None and not -1000 <= opts.priority <= 1000:
        raise TorchXOptionError("priority", f"is {opts.priority}: give -1000 to 1000")
    request = JobRequest(
        pool=pool,
        tasks=tasks,
        # Each role's container run options (mounts, /dev/shm, InfiniBand, its own) are its task's.
        containers=ContainerOptions(registry_conn_id=opts.registry_conn_id),
        blob=BlobOptions(output_container=opts.log_container if keep_logs else None, logs_prefix=LOGS_PREFIX),
        job_id=job_id,
        display_name=app.name,
        metadata=metadata,
        priority=opts.priority,
        job_max_wall_clock=timedelta(seconds=opts.max_wall_clock) if opts.max_wall_clock else None,
        # The first role or replica 0 that fails (after its retries) ends the app; describe ends it for the others.
        fail_fast=True,
        job_preparation=preparation,
        job_release=release,
    )
    request.check(rendered=True)
    return request


def _records(location: LogLocation | None, job_id: str, task_id: str) -> OutputSpec | None:
    """Replica 0's record and time index, uploaded beside its stdout and stderr (when the output is kept)."""
    if location is None:
        return None
    return OutputSpec(
        pattern=f"../{node.RECORDS_PATTERN}",
        container=location.container,
        path=location.path(job_id, task_id),
        upload="completion",
    )


@dataclass(frozen=True)
class _Part:
    """What one of an app's jobs shares with the others: the roles' task ids, whether the app has one role,
    and the metadata that ties the jobs together."""

    task_ids: list[str]
    single_role: bool
    metadata: dict[str, str]


def job_requests(
    app: AppDef,
    opts: AzureBatchOpts,
    *,
    job_id: str,
    app_id: str,
    has_storage: bool,
    note: Callable[[str], None],
    user: str | None = None,
) -> list[JobRequest]:
    """The app's Batch jobs: one, or one per pool when its roles name different VM sizes (:func:`pool_parts`).

    Every role runs at once on its own pool; the first job (whose id is ``job_id``, the app's) lists the
    others, and ``describe`` reads them all as one app (and ends the others when one fails)."""
    if not app.roles:
        raise AzureBatchValidationError("app", f"'{app.name}' has no roles")
    parts = pool_parts(app, opts)
    if len(parts) == 1:
        return [job_request(app, opts, job_id=job_id, app_id=app_id, has_storage=has_storage, note=note, user=user)]
    ids = task_ids(app.roles)
    jobs = [part_job_id(job_id, index) for index in range(len(parts))]
    job_of = {role: jobs[index] for index, part in enumerate(parts) for role in part}
    every_role = json.dumps(
        [
            [role.name, ids[index], role.num_replicas, role.entrypoint, job_of[index]]
            for index, role in enumerate(app.roles)
        ]
    )
    said: set[str] = set()

    def once(message: str) -> None:
        if message not in said:
            said.add(message)
            note(message)

    requests = []
    for index, part in enumerate(parts):
        ties = {ROLES_METADATA_KEY: every_role}
        ties |= {JOBS_METADATA_KEY: json.dumps(jobs[1:])} if index == 0 else {PART_OF_METADATA_KEY: job_id}
        requests.append(
            job_request(
                AppDef(app.name, roles=[app.roles[role] for role in part], metadata=app.metadata),
                opts,
                job_id=jobs[index],
                app_id=app_id,
                has_storage=has_storage,
                note=once,
                user=user,
                part=_Part([ids[role] for role in part], len(app.roles) == 1, ties),
            )
        )
    return requests
