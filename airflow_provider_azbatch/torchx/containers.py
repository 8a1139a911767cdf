"""A TorchX role's container: its bind and device mounts, a ``/dev/shm`` for DataLoader workers, InfiniBand's
devices and limits when it asks (checked against the VM size), and the app's and its own run options. No I/O."""

from __future__ import annotations

import shlex

from torchx.specs import BindMount, DeviceMount, Role

from airflow_provider_azbatch.compute import VmSize
from airflow_provider_azbatch.exceptions import AzureBatchValidationError
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
from airflow_provider_azbatch.torchx.options import AzureBatchOpts, TorchXOptionError

# Role metadata the scheduler reads: the role's own container run options and /dev/shm size.
RUN_OPTIONS_METADATA = "azure_batch/container_run_options"
SHM_SIZE_METADATA = "azure_batch/shm_size"
# shm_size's default: half the node's memory (see container_runtime); "none": Docker's own 64 MB.
AUTO_SHM, NO_SHM = "auto", "none"


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
