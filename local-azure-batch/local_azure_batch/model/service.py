"""The Batch account: pools, nodes, jobs and tasks, their state machines and the scheduler.

Everything here runs on one asyncio loop. Request handlers call the public methods (which never
block); processes, node boots and deletions run as background tasks that report back here.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from local_azure_batch.model.execution import Execution
from local_azure_batch.model.job_operations import JobOperations
from local_azure_batch.model.multi_instance import MultiInstanceExecution
from local_azure_batch.model.pool_operations import PoolOperations
from local_azure_batch.model.task_operations import TaskOperations
from local_azure_batch.runner.process import (
    ProcessRunner,
)
from local_azure_batch.runner.transfers import BlobTransfers, TransferAgent

from .clock import utcnow
from .jobs import (
    ACTIVE_JOB,
    DISABLED,
    DISABLING,
    ENABLING,
    Job,
)
from .pools import (
    POOL_DELETING,
    Pool,
)

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
    # Autoscale formulas run this often (the pool's own interval, min 5 minutes, is still validated
    # and reported); None evaluates at the pool's interval like the real service.
    autoscale_interval_seconds: float | None = 5.0
    # The autoscale sample period ($PendingTasks etc.); the real service samples every 30 s.
    sample_period_seconds: float = 1.0
    tick_seconds: float = 0.2
    # At most this many nodes (dedicated and low priority, all pools) in the account; None: no limit.
    # Stands in for the account's core quotas, which a simulated node has no cores to count against.
    node_quota: int | None = None


class BatchService(PoolOperations, JobOperations, TaskOperations, MultiInstanceExecution, Execution):
    def __init__(
        self,
        settings: ServiceSettings,
        runner: ProcessRunner | None = None,
        transfers: TransferAgent | None = None,
    ) -> None:
        self.settings = settings
        self.runner = runner or ProcessRunner()
        self.transfers = transfers or BlobTransfers()
        self.pools: dict[str, Pool] = {}
        self.jobs: dict[str, Job] = {}
        self._wake = asyncio.Event()
        self._background: set[asyncio.Task[Any]] = set()
        self._loops: list[asyncio.Task[Any]] = []
        self._last_sample: datetime | None = None
        self._closing = False

    # -- life cycle -----------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return self.settings.account_url

    async def start(self) -> None:
        self.settings.task_root.mkdir(parents=True, exist_ok=True)
        self._loops = [asyncio.create_task(self._scheduler_loop()), asyncio.create_task(self._ticker_loop())]

    async def stop(self) -> None:
        self._closing = True
        for loop_task in self._loops:
            loop_task.cancel()
        await self.runner.shutdown()
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._loops, *self._background, return_exceptions=True)

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background_done)
        return task

    def _background_done(self, task: asyncio.Task[Any]) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None and not self._closing:
            log.error("background work failed", exc_info=task.exception())

    def kick(self) -> None:
        self._wake.set()

    # -- time-driven work -----------------------------------------------------------------------------
    async def _ticker_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.tick_seconds)
            try:
                self._tick()
            except Exception:
                log.exception("ticker pass failed")

    def _tick(self) -> None:
        now = utcnow()
        for job in list(self.jobs.values()):
            deadline = job.wall_clock_deadline
            if deadline is not None and now >= deadline and job.state in (ACTIVE_JOB, DISABLED, DISABLING, ENABLING):
                self._begin_terminate(job, "MaxWallClockTimeExpiry")
        sample_due = (
            self._last_sample is None
            or (now - self._last_sample).total_seconds() >= self.settings.sample_period_seconds
        )
        if sample_due:
            self._last_sample = now
        for pool in list(self.pools.values()):
            if pool.state == POOL_DELETING:
                continue
            if sample_due:
                pool.record_sample(self._pool_sample(pool))
            if pool.spec.get("enableAutoScale") and pool.next_autoscale is not None and now >= pool.next_autoscale:
                self._run_autoscale(pool)
            self._check_allocation(pool)
