"""``SpotFallback``: when a job on Spot nodes moves to dedicated ones, and what Spot pools cannot have.

    BatchPool.shared(
        "train-spot",
        requirements={"gpus": 1, "gpu_kind": "A100", "low_priority": True},
        spot_fallback=SpotFallback(after_preemptions=2, no_spot_node_within=timedelta(minutes=20)),
    )

Spot nodes exist only in Batch accounts in the **user subscription** pool allocation mode (low-priority nodes,
what Batch managed accounts had, were retired on 30 September 2025); a Batch managed account's Spot pool gets no
node, and with a fallback the job goes to dedicated nodes at the first look at the pool (its allocation error).
How the move is done is Batch's own (see :mod:`airflow_provider_azbatch.runs.spot_fallback`): a shared pool's job
moves to a pool of dedicated nodes beside it (``<pool id>-dedicated``, autoscaled from zero, made like the Spot
pool otherwise), as Batch lets a disabled job change pools; a job's own auto pool is retargeted to dedicated nodes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from airflow_provider_azbatch.pools.errors import PoolStrategyError

# A pool id: letters, digits, hyphens and underscores, at most 64 characters (the Batch REST API).
_POOL_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
DEDICATED_SUFFIX = "-dedicated"


@dataclass(frozen=True)
class SpotFallback:
    """Move the job to dedicated nodes after ``after_preemptions`` preemptions of its tasks, or once its tasks have
    waited ``no_spot_node_within`` with none running (no Spot node came); either or both. ``dedicated_pool_id``:
    for a shared pool, the dedicated pool's id (default: the Spot pool's id and ``-dedicated``)."""

    after_preemptions: int | None = None
    no_spot_node_within: timedelta | None = None
    dedicated_pool_id: str | None = None

    def __post_init__(self) -> None:
        after, within = self.after_preemptions, self.no_spot_node_within
        if after is None and within is None:
            raise PoolStrategyError(
                "spot_fallback needs after_preemptions (a number of preemptions), no_spot_node_within (a "
                "timedelta) or both"
            )
        if after is not None and (isinstance(after, bool) or not isinstance(after, int) or after < 1):
            raise PoolStrategyError(f"spot_fallback.after_preemptions must be a whole number >= 1, got {after!r}")
        if within is not None and (not isinstance(within, timedelta) or within <= timedelta(0)):
            raise PoolStrategyError(
                f"spot_fallback.no_spot_node_within must be a positive timedelta (e.g. timedelta(minutes=20)), "
                f"got {within!r}"
            )
        if self.dedicated_pool_id is not None and (
            not isinstance(self.dedicated_pool_id, str) or not _POOL_ID.fullmatch(self.dedicated_pool_id)
        ):
            raise PoolStrategyError(
                "spot_fallback.dedicated_pool_id must be a pool id (letters, digits, hyphens and underscores, at "
                f"most 64 characters), got {self.dedicated_pool_id!r}"
            )

    def to_watch(self) -> dict[str, Any]:
        """What the watch needs to know (JSON: it travels in trigger kwargs)."""
        return {
            "after_preemptions": self.after_preemptions,
            "within_seconds": self.no_spot_node_within.total_seconds() if self.no_spot_node_within else None,
        }

    def dedicated_pool_for(self, pool_id: str) -> str:
        """The id of the dedicated pool a shared Spot pool's jobs move to."""
        twin = self.dedicated_pool_id or f"{pool_id}{DEDICATED_SUFFIX}"
        if not _POOL_ID.fullmatch(twin):
            raise PoolStrategyError(
                f"spot_fallback: the dedicated pool's id {twin!r} is longer than the 64 characters Batch allows: "
                "give spot_fallback a dedicated_pool_id"
            )
        if twin.lower() == pool_id.lower():
            raise PoolStrategyError(f"spot_fallback.dedicated_pool_id must differ from the Spot pool's id {pool_id!r}")
        return twin


def check_spot_overrides(overrides: Mapping[str, Any]) -> None:
    """What a Spot pool cannot have: ephemeral OS disks ("not supported with Spot VMs due to the service-managed
    eviction policy of Stop-Deallocate", https://learn.microsoft.com/azure/batch/batch-spot-vms#limitations)."""
    vm_config = overrides.get("virtualMachineConfiguration")
    os_disk = vm_config.get("osDisk") if isinstance(vm_config, Mapping) else None
    if isinstance(os_disk, Mapping) and os_disk.get("ephemeralOSDiskSettings"):
        raise PoolStrategyError(
            "pool_overrides.virtualMachineConfiguration.osDisk.ephemeralOSDiskSettings: Batch does not give Spot "
            "nodes (low_priority) ephemeral OS disks; leave it out, or ask for dedicated nodes"
        )
