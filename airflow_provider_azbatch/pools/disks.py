"""Data disks attached to every node of a pool the provider creates.

Batch attaches them empty and unformatted: partition, format and mount them in the pool's start task (which runs
as an administrator), e.g. ``mkfs.ext4 /dev/disk/azure/scsi1/lun0 && mount ... /mnt/data``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from airflow_provider_azbatch.pools.errors import PoolStrategyError

CACHING = ("none", "readonly", "readwrite")
STORAGE = ("standard_lrs", "premium_lrs", "standardssd_lrs")
MAX_LUN = 63


@dataclass(frozen=True)
class DataDisk:
    """``DataDisk(lun=0, size_gb=512)``: a managed disk on each node at logical unit ``lun``."""

    lun: int
    size_gb: int
    caching: str = "none"
    storage: str = "standard_lrs"

    def __post_init__(self) -> None:
        for name, value, low, high in (("lun", self.lun, 0, MAX_LUN), ("size_gb", self.size_gb, 1, 32767)):
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise PoolStrategyError(
                    f"data_disks: DataDisk.{name} must be a whole number {low}..{high}, got {value!r}"
                )
        if self.caching not in CACHING:
            raise PoolStrategyError(
                f"data_disks: DataDisk.caching must be one of {', '.join(CACHING)}, got {self.caching!r}"
            )
        if self.storage not in STORAGE:
            raise PoolStrategyError(
                f"data_disks: DataDisk.storage must be one of {', '.join(STORAGE)}, got {self.storage!r}"
            )

    def to_rest(self) -> dict[str, Any]:
        return {
            "lun": self.lun,
            "diskSizeGB": self.size_gb,
            "caching": self.caching,
            "managedDisk": {"storageAccountType": self.storage},
        }


def check_data_disks(disks: Sequence[Any], max_data_disks: int | None) -> tuple[DataDisk, ...]:
    if isinstance(disks, (str, bytes)) or not isinstance(disks, Sequence):
        raise PoolStrategyError(f"data_disks must be a list of DataDisk, got {disks!r}")
    luns: dict[int, int] = {}
    for index, disk in enumerate(disks):
        if not isinstance(disk, DataDisk):
            raise PoolStrategyError(f"data_disks[{index}] must be a DataDisk, got {type(disk).__name__} {disk!r}")
        if disk.lun in luns:
            raise PoolStrategyError(f"data_disks[{index}].lun {disk.lun} is also data_disks[{luns[disk.lun]}].lun")
        luns[disk.lun] = index
    if max_data_disks is not None and len(disks) > max_data_disks:
        raise PoolStrategyError(f"data_disks: the VM size takes at most {max_data_disks} data disks, got {len(disks)}")
    return tuple(disks)
