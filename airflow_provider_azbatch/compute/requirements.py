"""Resource requirements of one task, and choosing the cheapest VM size that runs it."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from airflow_provider_azbatch.compute._format import fmt_number
from airflow_provider_azbatch.compute.catalog import VmCatalog, VmSize, load_catalog
from airflow_provider_azbatch.compute.errors import InvalidRequirementsError, NoFittingVmSizeError
from airflow_provider_azbatch.compute.images import DEFAULT_IMAGE_FAMILY, check_image_family

_MEMORY = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([kmgt])(i|ib|b)?\s*", re.IGNORECASE)
_POWER = {"k": 1, "m": 2, "g": 3, "t": 4}
_GIB = 2**30


def parse_memory_gib(memory: str | float) -> float:
    """Convert ``"64Gi"``, ``"64GiB"``, ``"512Mi"``, ``"64G"``/``"64GB"`` (decimal) or a number of GiB to GiB.

    Suffixes follow Kubernetes: ``Ki/Mi/Gi/Ti`` are powers of 1024, ``K/M/G/T`` (with or without ``B``)
    powers of 1000. A unitless string is refused because Kubernetes would read it as bytes while a
    person usually means GiB.
    """
    if isinstance(memory, bool):
        raise InvalidRequirementsError(f"requirements.memory must be a size like '64Gi', got {memory!r}")
    if isinstance(memory, (int, float)):
        return float(memory)
    match = _MEMORY.fullmatch(memory) if isinstance(memory, str) else None
    if match is None:
        raise InvalidRequirementsError(
            f"requirements.memory {memory!r} is not a memory size; write e.g. '64Gi' (GiB), "
            "'64G' or '64GB' (10^9 bytes), or '512Mi'"
        )
    amount, unit, suffix = match.groups()
    base = 1024 if suffix and suffix.lower().startswith("i") else 1000
    scale: int = base ** _POWER[unit.lower()]  # typeshed types int ** int as Any (a negative power is a float)
    return float(amount) * scale / _GIB


def _check_number(field: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        hint = ""
        if field == "memory_gib" and isinstance(value, str):
            hint = "; for sizes like '64Gi' use ResourceRequirements.with_memory"
        raise InvalidRequirementsError(f"requirements.{field} must be a number, got {value!r}{hint}")
    if not value > 0 or math.isinf(value):
        raise InvalidRequirementsError(f"requirements.{field} must be > 0, got {value!r}")
    return value


def _check_flag(field: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise InvalidRequirementsError(f"requirements.{field} must be True or False, got {value!r}")
    return value


@dataclass(frozen=True)
class ResourceRequirements:
    """What one task needs from a node.

    ``gpu_kind`` (e.g. ``"T4"``, ``"a100"``) is upper-cased; it is checked against the catalog when a
    size is selected, since the catalog in use defines which kinds exist. ``low_priority`` allows
    spot/low-priority nodes. ``os_image`` is an image family (see ``images.known_image_families``).
    """

    cpus: float = 1
    memory_gib: float = 1
    gpus: int = 0
    gpu_kind: str | None = None
    low_priority: bool = False
    os_image: str = DEFAULT_IMAGE_FAMILY
    containers: bool = False

    def __post_init__(self) -> None:
        _check_number("cpus", self.cpus)
        _check_number("memory_gib", self.memory_gib)
        if isinstance(self.gpus, bool) or not isinstance(self.gpus, int) or self.gpus < 0:
            raise InvalidRequirementsError(f"requirements.gpus must be a whole number >= 0, got {self.gpus!r}")
        if self.gpu_kind is not None:
            if not isinstance(self.gpu_kind, str) or not self.gpu_kind.strip():
                raise InvalidRequirementsError(
                    f"requirements.gpu_kind must be a GPU model such as 'T4' or None, got {self.gpu_kind!r}"
                )
            object.__setattr__(self, "gpu_kind", self.gpu_kind.strip().upper())
            if self.gpus == 0:
                raise InvalidRequirementsError(
                    f"requirements.gpu_kind={self.gpu_kind!r} needs gpus >= 1, got gpus=0; set gpus or drop gpu_kind"
                )
        _check_flag("low_priority", self.low_priority)
        _check_flag("containers", self.containers)
        if not isinstance(self.os_image, str):
            raise InvalidRequirementsError(f"requirements.os_image must be an image family name, got {self.os_image!r}")
        object.__setattr__(self, "os_image", check_image_family(self.os_image))

    @classmethod
    def with_memory(cls, memory: str | float, **kwargs: Any) -> ResourceRequirements:
        """Like the constructor, but memory as ``"64Gi"``, ``"64GB"``, ``"512Mi"`` or GiB."""
        if "memory_gib" in kwargs:
            raise InvalidRequirementsError("pass either memory or memory_gib, not both")
        return cls(memory_gib=parse_memory_gib(memory), **kwargs)

    def describe(self) -> str:
        """``cpus=2, memory=8 GiB, gpus=0``: the form used in error messages."""
        text = f"cpus={fmt_number(self.cpus)}, memory={fmt_number(self.memory_gib)} GiB, gpus={self.gpus}"
        if self.gpu_kind:
            text += f", gpu_kind={self.gpu_kind}"
        if self.low_priority:
            text += ", low_priority=True"
        return text


def vm_size_shortfalls(vm: VmSize, req: ResourceRequirements) -> list[str]:
    """What ``vm`` lacks for ``req``, e.g. ``["4 vCPU (has 2)"]``; empty when it fits."""
    missing = []
    if vm.vcpus < req.cpus:
        missing.append(f"{fmt_number(req.cpus)} vCPU (has {vm.vcpus})")
    if vm.memory_gib < req.memory_gib:
        missing.append(f"{fmt_number(req.memory_gib)} GiB memory (has {fmt_number(vm.memory_gib)})")
    kind_differs = req.gpu_kind is not None and vm.gpus > 0 and vm.gpu_kind != req.gpu_kind
    if vm.gpus < req.gpus or kind_differs:
        need = f"{req.gpus} {req.gpu_kind} GPU" if req.gpu_kind else f"{req.gpus} GPU"
        has = f"{vm.gpus} {vm.gpu_kind} GPU" if vm.gpus else "0 GPU"
        missing.append(f"{need} (has {has})")
    return missing


def fits(vm: VmSize, req: ResourceRequirements) -> bool:
    """Whether one task with these requirements can run on a node of this size."""
    return not vm_size_shortfalls(vm, req)


def check_gpu_kind(req: ResourceRequirements, catalog: VmCatalog) -> None:
    """Refuse a ``gpu_kind`` no size in ``catalog`` offers, naming the kinds that exist."""
    if req.gpu_kind is None or req.gpu_kind in catalog.gpu_kinds:
        return
    message = (
        f"requirements.gpu_kind {req.gpu_kind!r} is not offered by any VM size in the catalog; "
        f"use one of: {', '.join(sorted(catalog.gpu_kinds)) or '(the catalog has no GPU sizes)'}"
    )
    retired = catalog.retired_gpu_kinds.get(req.gpu_kind)
    if retired:
        message += f" ({req.gpu_kind}: {retired})"
    raise InvalidRequirementsError(message)


def _eligible(vm: VmSize, req: ResourceRequirements) -> bool:
    # CPU-only work never lands on a GPU size: a large-memory CPU task would otherwise get a GPU node
    # at several times the price of an E-series size of the same memory, or fail less visibly.
    if (vm.gpus > 0) != (req.gpus > 0):
        return False
    if req.gpu_kind is not None and vm.gpu_kind != req.gpu_kind:
        return False
    if vm.explicit_only and req.gpu_kind is None:
        return False
    return vm.low_priority_capable or not req.low_priority


def _miss(vm: VmSize, req: ResourceRequirements) -> float:
    """Sum of the fractions by which each resource falls short: 0 for a fit."""
    total = max(0.0, req.cpus - vm.vcpus) / req.cpus + max(0.0, req.memory_gib - vm.memory_gib) / req.memory_gib
    if req.gpus:
        total += max(0, req.gpus - vm.gpus) / req.gpus
    return total


def select_vm_size(req: ResourceRequirements, catalog: VmCatalog | None = None) -> VmSize:
    """The cheapest size that fits one task of ``req``; ties go to fewer vCPUs, then name.

    Raises ``NoFittingVmSizeError`` naming the three sizes that miss by the least (relative shortfall
    summed over vCPU, memory and GPU count) when nothing fits.
    """
    catalog = catalog if catalog is not None else load_catalog()
    check_gpu_kind(req, catalog)
    candidates = [vm for vm in catalog if _eligible(vm, req)]
    fitting = [vm for vm in candidates if fits(vm, req)]
    if fitting:
        return min(fitting, key=lambda vm: (vm.hourly_usd, vm.vcpus, vm.name))
    closest = sorted(candidates, key=lambda vm: (_miss(vm, req), vm.hourly_usd, vm.name))[:3]
    listed = ", ".join(vm.describe() for vm in closest) or "none (no size in the catalog is eligible)"
    raise NoFittingVmSizeError(f"No Azure VM size in the catalog fits {req.describe()}. Closest: {listed}.")
