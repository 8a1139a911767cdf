"""The Batch account's state: its settings, pools and jobs, the processes and transfers its nodes use, and the
background work running on them.

Everything runs on one asyncio loop. The operation classes (pools, jobs, tasks, execution) each receive the
account, and the other operations they use, when the service is put together (``model/service.py``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from local_azure_batch.account import DEV_LOCATION
from local_azure_batch.runner.process import ProcessRunner
from local_azure_batch.runner.transfers import BlobTransfers, TransferAgent

from .addresses import NodeAddresses
from .errors import not_found
from .jobs import Job
from .pools import CREATING, ComputeNode, Pool

if TYPE_CHECKING:
    from .job_schedules import JobSchedule
    from .tasks import Task

log = logging.getLogger(__name__)


@dataclass
class ServiceSettings:
    account_name: str
    task_root: Path
    account_url: str = ""
    # How long a simulated node takes from allocation to idle (real nodes: minutes).
    node_start_seconds: float = 1.0
    # How long deleting pools/jobs stay visible in the deleting state before they are gone.
    delete_seconds: float = 0.3
    # How long the nodes of a completed job's auto pool keep its task files after the pool starts deleting. On Azure
    # they leave the pool over minutes; a watcher reading a finished task's last output meets them still there.
    auto_pool_files_seconds: float = 3.0
    # Autoscale formulas run this often (the pool's own interval, min 5 minutes, is still validated
    # and reported); None evaluates at the pool's interval like the real service.
    autoscale_interval_seconds: float | None = 5.0
    # The autoscale sample period ($PendingTasks etc.); the real service samples every 30 s.
    sample_period_seconds: float = 1.0
    tick_seconds: float = 0.2
    # At most this many nodes (dedicated and low priority, all pools) in the account; None: no limit.
    # Stands in for the account's core quotas, which a simulated node has no cores to count against.
    node_quota: int | None = None
    # At most this many Spot nodes of the account up at once (model/spot.py); None: as many as pools ask for.
    spot_capacity: int | None = None
    # The account's active job and job schedule quota, and its pool quota; None: no limit.
    job_quota: int | None = None
    pool_quota: int | None = None
    # The subscription the account is in: pools' subnets and public IPs must be in it (None: not checked).
    subscription_id: str | None = None
    # Blob endpoints of storage accounts by name, for blobfuse mounts (real Batch derives them from the name).
    blob_endpoints: dict[str, str] = field(default_factory=dict)
    # Local directories standing for mount sources (an NFS export, an Azure Files URL, a CIFS share).
    mount_sources: dict[str, str] = field(default_factory=dict)
    # VM sizes accepted besides the shipped list (data/vm_sizes.json), lower case: sizes newer than the list.
    extra_vm_sizes: frozenset[str] = frozenset()
    # The region the account is in, and the sizes (lower case) it does not offer: pools of those are refused.
    location: str = DEV_LOCATION
    unavailable_vm_sizes: frozenset[str] = frozenset()
    # Job schedules run this many times faster than their recurrenceInterval and startWindow say (60: a
    # 1-minute recurrence comes every second), for tests; 1 is the service's own pace.
    schedule_time_scale: float = 1.0
    # Where the account's state is saved and loaded from (model/persistence.py); None: kept in memory only.
    state_dir: Path | None = None
    # How often a changed state is saved while the service runs (it is saved on stop too).
    save_interval_seconds: float = 2.0
    # The order of AZ_BATCH_HOST_LIST, which Batch does not document: the primary's node first, or last (for
    # programs that must not take the list's first host for the primary; AZ_BATCH_MASTER_NODE names it).
    host_list_order: str = "primary-first"


HOST_LIST_ORDERS = ("primary-first", "primary-last")


class Account:
    def __init__(
        self,
        settings: ServiceSettings,
        runner: ProcessRunner | None = None,
        transfers: TransferAgent | None = None,
    ) -> None:
        self.settings = settings
        self.runner = runner or ProcessRunner()
        self.transfers: TransferAgent = transfers or BlobTransfers()
        self.pools: dict[str, Pool] = {}
        self.jobs: dict[str, Job] = {}
        self.job_schedules: dict[str, JobSchedule] = {}
        self.node_addresses = NodeAddresses()
        # Set when something may let a task start (a node became idle, a task was added, ...).
        self.wake = asyncio.Event()
        self.closing = False
        self._background: set[asyncio.Task[Any]] = set()

    @property
    def base_url(self) -> str:
        return self.settings.account_url

    # -- background work ------------------------------------------------------------------------------
    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background_done)
        return task

    def _background_done(self, task: asyncio.Task[Any]) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None and not self.closing:
            log.error("background work failed", exc_info=task.exception())

    def kick(self) -> None:
        """Let the scheduler look for tasks to start."""
        self.wake.set()

    async def close(self) -> None:
        self.closing = True
        await self.runner.shutdown()
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)

    # -- lookups, as the service answers them ---------------------------------------------------------
    def pool(self, pool_id: str) -> Pool:
        pool = self.pools.get(pool_id.lower())
        if pool is None:
            raise not_found("Pool")
        return pool

    def job(self, job_id: str) -> Job:
        job = self.jobs.get(job_id.lower())
        if job is None:
            raise not_found("Job")
        return job

    def task(self, job_id: str, task_id: str) -> Task:
        task = self.job(job_id).tasks.get(task_id.lower())
        if task is None:
            raise not_found("Task")
        return task

    def node(self, pool_id: str, node_id: str) -> ComputeNode:
        pool = self.pool(pool_id)
        node = pool.nodes.get(node_id)
        if node is None:
            node = next((item for item in pool.nodes.values() if item.id.lower() == node_id.lower()), None)
        if node is None or node.state == CREATING:
            raise not_found("Node")
        return node

    def new_node_address(self) -> str:
        """A loopback address for a node being allocated, held by no other node."""
        return self.node_addresses.take(
            lambda: {node.ip_address for pool in self.pools.values() for node in pool.nodes.values()}
        )

    def pool_of(self, job: Job) -> Pool | None:
        return self.pools.get((job.pool_id or "").lower())

    # -- quotas ---------------------------------------------------------------------------------------
    def active_jobs(self) -> int:
        """Jobs and job schedules counted against the active job and schedule quota: all but completed (and
        deleting) ones."""
        schedules = sum(1 for item in self.job_schedules.values() if item.state not in ("completed", "deleting"))
        return schedules + sum(1 for job in self.jobs.values() if job.counts_against_quota)

    def pool_count(self) -> int:
        """Pools counted against the pool quota: every pool of the account (auto-pools too) until it is gone."""
        return len(self.pools)

    def free_node_quota(self) -> int | None:
        """How many more nodes the account may hold (None: no limit); nodes on their way out do not count."""
        quota = self.settings.node_quota
        if quota is None:
            return None
        used = sum(1 for pool in self.pools.values() for node in pool.nodes.values() if not node.leaving)
        return max(0, quota - used)
