"""Catalog of Azure VM sizes usable by Batch Linux pools, loaded from ``data/vm_sizes.json``."""

from __future__ import annotations

import difflib
import functools
import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

from airflow_provider_azbatch.compute._format import fmt_number
from airflow_provider_azbatch.compute.errors import CatalogError, UnknownVmSizeError

_PACKAGE = "airflow_provider_azbatch.compute"
_DEFAULT_RESOURCE = "data/vm_sizes.json"


@dataclass(frozen=True)
class VmSize:
    """One Azure VM size as Batch knows it.

    ``name`` is lowercase (``standard_d2s_v3``), the form Batch pools report. ``gpu_memory_gib`` is per
    GPU. ``explicit_only`` sizes are chosen only when the requirement names their ``gpu_kind``: they
    need set-up the default images lack (the NVadsA10 v5 GPUs need NVIDIA's GRID driver). ``infiniband``: the
    size has InfiniBand (RDMA) networking between nodes, which NCCL uses across nodes instead of TCP.
    """

    name: str
    family: str
    vcpus: int
    memory_gib: float
    hourly_usd: float
    gpus: int = 0
    gpu_kind: str | None = None
    gpu_memory_gib: float | None = None
    max_data_disks: int | None = None
    low_priority_capable: bool = True
    explicit_only: bool = False
    infiniband: bool = False

    def describe(self) -> str:
        """``standard_e96s_v5 (96 vCPU, 672 GiB, 0 GPU)``: the form used in error messages."""
        gpu = f"{self.gpus} {self.gpu_kind} GPU" if self.gpus else "0 GPU"
        return f"{self.name} ({self.vcpus} vCPU, {fmt_number(self.memory_gib)} GiB, {gpu})"


class VmCatalog:
    """An immutable set of VM sizes with case-insensitive lookup by name."""

    def __init__(
        self,
        sizes: tuple[VmSize, ...] | list[VmSize],
        *,
        region: str = "",
        retrieved: str = "",
        retired_gpu_kinds: Mapping[str, str] | None = None,
    ) -> None:
        by_name: dict[str, VmSize] = {}
        for size in sizes:
            key = size.name.lower()
            if key in by_name:
                raise CatalogError(f"VM catalog lists {key!r} twice")
            by_name[key] = size
        self._sizes = tuple(sizes)
        self._by_name = MappingProxyType(by_name)
        self._region = region
        self._retrieved = retrieved
        self._retired_gpu_kinds = MappingProxyType(
            {kind.upper(): note for kind, note in (retired_gpu_kinds or {}).items()}
        )

    @property
    def sizes(self) -> tuple[VmSize, ...]:
        return self._sizes

    @property
    def region(self) -> str:
        """Region the prices are for (specs do not depend on it; availability does)."""
        return self._region

    @property
    def retrieved(self) -> str:
        return self._retrieved

    @property
    def retired_gpu_kinds(self) -> Mapping[str, str]:
        """GPU kinds no longer offered, with a note on what replaced them (used in error messages)."""
        return self._retired_gpu_kinds

    @property
    def gpu_kinds(self) -> frozenset[str]:
        return frozenset(size.gpu_kind for size in self._sizes if size.gpu_kind)

    def find(self, name: str) -> VmSize | None:
        return self._by_name.get(name.strip().lower())

    def get(self, name: str) -> VmSize:
        size = self.find(name)
        if size is None:
            raise UnknownVmSizeError(self.unknown_size_message(name))
        return size

    def unknown_size_message(self, name: str) -> str:
        """Why ``name`` is not a size of this catalog, with the listed names it is closest to."""
        message = f"VM size {name!r} is not in the VM catalog ({len(self._sizes)} sizes"
        message += f", prices for {self._region})" if self._region else ")"
        close = self.close_names(name)
        if close:
            return f"{message}; did you mean {', '.join(close)}?"
        return f"{message}; use a Batch size name such as 'standard_d4s_v5', or pass a catalog that lists it"

    def close_names(self, name: str) -> list[str]:
        """The listed sizes ``name`` is most likely a typo of (at most three)."""
        # Compare without the shared "standard_" prefix, which otherwise makes every name look close.
        by_suffix = {key.removeprefix("standard_"): key for key in self._by_name}
        wanted = name.strip().lower().removeprefix("standard_")
        return [by_suffix[c] for c in difflib.get_close_matches(wanted, list(by_suffix), n=3, cutoff=0.75)]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.find(name) is not None

    def __iter__(self) -> Iterator[VmSize]:
        return iter(self._sizes)

    def __len__(self) -> int:
        return len(self._sizes)

    def __repr__(self) -> str:
        return f"VmCatalog({len(self._sizes)} sizes, region={self._region!r}, retrieved={self._retrieved!r})"

    @classmethod
    def from_dict(cls, document: Mapping[str, Any], *, origin: str = "VM catalog") -> VmCatalog:
        """Build a catalog from the parsed JSON document (``{"header": {...}, "sizes": [...]}``)."""
        header = document.get("header", {})
        raw_sizes = document.get("sizes")
        if not isinstance(header, Mapping) or not isinstance(raw_sizes, list):
            raise CatalogError(f"{origin}: expected an object with a 'header' object and a 'sizes' list")
        sizes = [_parse_size(entry, index, origin) for index, entry in enumerate(raw_sizes)]
        retired = header.get("retired_gpu_kinds", {})
        if not isinstance(retired, Mapping):
            raise CatalogError(f"{origin}: header.retired_gpu_kinds must be an object")
        return cls(
            sizes,
            region=str(header.get("region", "")),
            retrieved=str(header.get("retrieved", "")),
            retired_gpu_kinds={str(k): str(v) for k, v in retired.items()},
        )


def load_catalog(path: Path | str | None = None) -> VmCatalog:
    """Load a catalog file; without ``path`` the packaged catalog, parsed once per process."""
    if path is None:
        return _default_catalog()
    path = Path(path)
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise CatalogError(f"{path}: not valid JSON ({exc})") from exc
    return VmCatalog.from_dict(document, origin=str(path))


@functools.cache
def _default_catalog() -> VmCatalog:
    text = resources.files(_PACKAGE).joinpath(_DEFAULT_RESOURCE).read_text(encoding="utf-8")
    return VmCatalog.from_dict(json.loads(text), origin=f"{_PACKAGE}/{_DEFAULT_RESOURCE}")


def _parse_size(entry: object, index: int, origin: str) -> VmSize:
    where = f"{origin}: sizes[{index}]"
    if not isinstance(entry, Mapping):
        raise CatalogError(f"{where} must be an object")
    name = entry.get("name")
    if not isinstance(name, str) or not name.strip():
        raise CatalogError(f"{where}: 'name' must be a non-empty string")
    where = f"{where} ({name!r})"

    def number(key: str, *, integer: bool = False, required: bool = True, minimum: float = 0) -> Any:
        value = entry.get(key)
        if value is None and not required:
            return None
        kind_ok = isinstance(value, int) if integer else isinstance(value, (int, float))
        numeric = value if kind_ok and not isinstance(value, bool) else None
        if numeric is None or not math.isfinite(numeric) or numeric < minimum:
            wanted = "an integer" if integer else "a number"
            raise CatalogError(f"{where}: {key!r} must be {wanted} >= {minimum}, got {value!r}")
        return value

    gpus = number("gpus", integer=True, required=False) or 0
    gpu_memory = number("gpu_memory_gib", required=False)
    gpu_kind = entry.get("gpu_kind")
    if gpus and (not isinstance(gpu_kind, str) or not gpu_kind.strip()):
        raise CatalogError(f"{where}: 'gpu_kind' is required when 'gpus' is {gpus}")
    if not gpus and gpu_kind is not None:
        raise CatalogError(f"{where}: 'gpu_kind' must be null when the size has no GPU")
    flags = {}
    for key, default in (("low_priority_capable", True), ("explicit_only", False), ("infiniband", False)):
        flag = entry.get(key, default)
        if not isinstance(flag, bool):
            raise CatalogError(f"{where}: {key!r} must be true or false, got {flag!r}")
        flags[key] = flag
    family = entry.get("family")
    if not isinstance(family, str) or not family:
        raise CatalogError(f"{where}: 'family' must be a non-empty string")
    return VmSize(
        name=name.strip().lower(),
        family=family,
        vcpus=number("vcpus", integer=True, minimum=1),
        memory_gib=float(number("memory_gib", minimum=0.001)),
        hourly_usd=float(number("hourly_usd")),
        gpus=gpus,
        gpu_kind=gpu_kind.strip().upper() if gpus and isinstance(gpu_kind, str) else None,
        gpu_memory_gib=None if gpu_memory is None else float(gpu_memory),
        max_data_disks=number("max_data_disks", integer=True, required=False),
        **flags,
    )
