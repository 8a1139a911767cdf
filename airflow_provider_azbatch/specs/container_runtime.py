"""Container run options that make a node ready for PyTorch: shared memory for DataLoader workers, and the
InfiniBand devices and limits NCCL needs to talk between nodes over RDMA instead of TCP.

Docker gives a container a 64 MB ``/dev/shm``; DataLoader workers pass batches through it and die with a bus
error when it is full. ``shm_size`` sets it (``16g``), or ``host`` shares the node's IPC namespace
(``--ipc=host``, the node's own ``/dev/shm``). ``/dev/shm`` is a tmpfs: its size is a ceiling, memory is used
only as it is written.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from airflow_provider_azbatch.compute.catalog import VmSize

# shm_size's value that shares the node's IPC namespace instead of sizing the container's own /dev/shm.
HOST_IPC = "host"
# What NCCL needs of a container to use the node's InfiniBand adapters (RDMA): the devices, pinned memory
# without limit, and the host's network, where the adapters' interfaces are.
INFINIBAND_RUN_OPTIONS = ("--device=/dev/infiniband", "--ulimit memlock=-1", "--cap-add=IPC_LOCK", "--network=host")
# NCCL falls back to TCP silently when it does not find InfiniBand; told to use it, it says why it cannot.
INFINIBAND_ENVIRONMENT: Mapping[str, str] = {"NCCL_IB_DISABLE": "0"}
_SIZE = re.compile(r"[1-9][0-9]*(b|k|m|g)", re.IGNORECASE)
_SHM_OPTIONS = re.compile(r"(^|\s)--(shm-size|ipc)(=|\s)")


class ContainerRuntimeError(ValueError):
    """A container option that cannot work: a /dev/shm size Docker would refuse, or InfiniBand on a VM size without
    it. The message follows the option's name, which the caller gives."""


def shm_option(shm_size: str | None) -> str | None:
    """The run option for ``shm_size`` (``16g``, ``512m``, ``host``; None or empty: Docker's 64 MB)."""
    if shm_size is None or not str(shm_size).strip():
        return None
    value = str(shm_size).strip()
    if value.lower() == HOST_IPC:
        return "--ipc=host"
    if not _SIZE.fullmatch(value):
        raise ContainerRuntimeError(
            f"is {shm_size!r}: give a size with its unit (e.g. 16g or 512m), or '{HOST_IPC}' to share the "
            "node's /dev/shm (--ipc=host)"
        )
    return f"--shm-size={value.lower()}"


def half_of_memory(vm: VmSize) -> str:
    """Half the node's memory, in GiB: what Linux gives ``/dev/shm`` on the node itself."""
    return f"{max(1, int(vm.memory_gib // 2))}g"


def sets_shared_memory(run_options: str | None) -> bool:
    """Whether run options already say how big ``/dev/shm`` is (``--shm-size``) or share the node's (``--ipc``)."""
    return bool(run_options) and _SHM_OPTIONS.search(run_options or "") is not None


def infiniband_options() -> str:
    return " ".join(INFINIBAND_RUN_OPTIONS)


def check_infiniband(vm: VmSize | None) -> None:
    """Refuse InfiniBand on a size that has none (a size the catalog does not know is taken as it is)."""
    if vm is None or not vm.vcpus or vm.infiniband:
        return
    raise ContainerRuntimeError(
        f"asks for InfiniBand, but VM size {vm.name} has none: use a size with InfiniBand (the ND sizes, "
        "e.g. standard_nd96asr_v4 or standard_nd96isr_h100_v5), or leave InfiniBand off (NCCL then uses TCP)"
    )


def join_options(*parts: str | None) -> str | None:
    """Run options in order (later ones win where Docker takes one value); None when there are none."""
    text = " ".join(part.strip() for part in parts if part and part.strip())
    return text or None
