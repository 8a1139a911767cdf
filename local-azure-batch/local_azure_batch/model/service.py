"""The Batch service model put together: the account, and the operations that work on it.

The REST layer calls ``service.pools``, ``service.nodes``, ``service.jobs``, ``service.job_schedules`` and
``service.tasks``; the scheduler and the ticker run in the background from :meth:`BatchService.start` to
:meth:`BatchService.stop`.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime
from pathlib import Path
from typing import Any

from local_azure_batch.runner.process import ProcessRunner
from local_azure_batch.runner.transfers import TransferAgent

from .account import Account, ServiceSettings
from .allocation import Allocation
from .autoscaling import AutoScaling
from .clock import utcnow
from .execution import Execution
from .job_operations import JobOperations
from .job_schedule_operations import JobScheduleOperations
from .job_side_tasks import JobSideTasks
from .jobs import ACTIVE_JOB, DISABLED, DISABLING, ENABLING
from .multi_instance import MultiInstanceExecution
from .node_operations import NodeOperations
from .persistence import STATE_FILE, encode, read, remove_leftovers, restore, write_atomically
from .pool_operations import PoolOperations
from .pools import POOL_DELETING
from .scheduler import Scheduler
from .spot import Spot
from .task_operations import TaskOperations

log = logging.getLogger(__name__)

# A job's wall clock runs out only in these states; terminating, completed or deleting jobs are past it.
_WALL_CLOCK_STATES = (ACTIVE_JOB, DISABLED, DISABLING, ENABLING)


class BatchService:
    def __init__(
        self,
        settings: ServiceSettings,
        runner: ProcessRunner | None = None,
        transfers: TransferAgent | None = None,
    ) -> None:
        self.account = Account(settings, runner, transfers)
        self.allocation = Allocation(self.account)
        self.autoscaling = AutoScaling(self.account, self.allocation)
        self.pools = PoolOperations(self.account, self.allocation, self.autoscaling)
        self.nodes = NodeOperations(self.account, self.allocation)
        side_tasks = JobSideTasks(self.account)
        self.jobs = JobOperations(self.account, self.pools, side_tasks)
        self.tasks = TaskOperations(self.account, self.jobs)
        self.job_schedules = JobScheduleOperations(self.account, self.jobs)
        execution = Execution(self.account, self.jobs, side_tasks)
        self.scheduler = Scheduler(self.account, execution, MultiInstanceExecution(self.account, execution, side_tasks))
        self.spot = Spot(self.account, self.allocation)
        self._loops: list[asyncio.Task[Any]] = []
        self._last_sample: datetime | None = None
        self._saved = ""

    @property
    def settings(self) -> ServiceSettings:
        return self.account.settings

    async def start(self) -> None:
        """Start the background work, after loading the saved state (``StateFileError`` if it cannot be read)."""
        self.settings.task_root.mkdir(parents=True, exist_ok=True)
        if self.settings.state_dir is not None:
            self._load(self.settings.state_dir / STATE_FILE)
        self._loops = [asyncio.create_task(self.scheduler.run()), asyncio.create_task(self._ticker())]
        if self.settings.state_dir is not None:
            self._loops.append(asyncio.create_task(self._saver()))

    async def stop(self) -> None:
        for loop_task in self._loops:
            loop_task.cancel()
        # Saved before the processes are stopped: what was running is requeued at the next start.
        self.save()
        await self.account.close()
        await asyncio.gather(*self._loops, return_exceptions=True)

    # -- the saved state ------------------------------------------------------------------------------
    @property
    def state_file(self) -> Path | None:
        return None if self.settings.state_dir is None else self.settings.state_dir / STATE_FILE

    def save(self) -> None:
        """Write the account's state to the state file (if there is one) when it changed since the last save."""
        path = self.state_file
        if path is None:
            return
        text = encode(self.account)
        if text != self._saved:
            write_atomically(path, text)
            self._saved = text

    def _load(self, path: Path) -> None:
        remove_leftovers(path)
        data = read(path)
        if data is None:
            return
        restored = restore(self.account, data, path)
        for pool in restored.pools_to_resize:
            self.allocation.resize(pool)
        for node in restored.start_tasks_to_rerun:
            self.allocation.rerun_start_task(node)
        for job in restored.jobs_to_terminate:
            self.jobs.begin_terminate(job, str(job.execution.get("terminateReason") or "UserTerminate"))
        self.account.kick()
        log.info("loaded %d pools and %d jobs from %s", len(self.account.pools), len(self.account.jobs), path)

    async def _saver(self) -> None:
        while True:
            await asyncio.sleep(self.settings.save_interval_seconds)
            try:
                self.save()
            except Exception:
                log.exception("saving the state failed")

    # -- time-driven work -----------------------------------------------------------------------------
    async def _ticker(self) -> None:
        while True:
            await asyncio.sleep(self.settings.tick_seconds)
            try:
                self.tick()
            except Exception:
                log.exception("ticker pass failed")

    def tick(self) -> None:
        """Job schedules' due jobs, job wall clocks, autoscale samples and evaluations, pools done resizing."""
        self.job_schedules.tick()
        now = utcnow()
        for job in list(self.account.jobs.values()):
            deadline = job.wall_clock_deadline
            if deadline is not None and now >= deadline and job.state in _WALL_CLOCK_STATES:
                self.jobs.begin_terminate(job, "MaxWallClockTimeExpiry")
        sample_due = (
            self._last_sample is None
            or (now - self._last_sample).total_seconds() >= self.settings.sample_period_seconds
        )
        if sample_due:
            self._last_sample = now
        for pool in list(self.account.pools.values()):
            if pool.state == POOL_DELETING:
                continue
            if sample_due:
                self.autoscaling.sample(pool)
            if pool.spec.get("enableAutoScale") and pool.next_autoscale is not None and now >= pool.next_autoscale:
                self.autoscaling.run(pool)
            self.allocation.check(pool)
