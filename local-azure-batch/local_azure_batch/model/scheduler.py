"""Which ready tasks start where: jobs by priority, then age; tasks in order onto nodes with free slots."""

from __future__ import annotations

import logging

from .account import Account
from .execution import Execution
from .jobs import Job
from .multi_instance import MultiInstanceExecution
from .placement import hosts_multi_instance_tasks, pick_instance_nodes, pick_node
from .pools import POOL_DELETING, ComputeNode, Pool
from .tasks import ACTIVE, Task

log = logging.getLogger(__name__)


class Scheduler:
    def __init__(self, account: Account, execution: Execution, multi_instance: MultiInstanceExecution) -> None:
        self.account = account
        self.execution = execution
        self.multi_instance = multi_instance

    async def run(self) -> None:
        """Schedule each time something may let a task start (the account's wake event)."""
        wake = self.account.wake
        while True:
            await wake.wait()
            wake.clear()
            try:
                self.schedule()
            except Exception:
                log.exception("scheduler pass failed")

    def schedule(self) -> None:
        # Pools with a usable node first: when every node is busy (or there is none), no job is looked at.
        usable = {
            pool.key: nodes
            for pool in self.account.pools.values()
            if pool.state != POOL_DELETING and (nodes := [node for node in pool.nodes.values() if node.usable])
        }
        if not usable:
            return
        by_pool: dict[str, list[Job]] = {}
        for job in self.account.jobs.values():
            if job.is_schedulable and job.ready and job.pool_id and job.pool_id.lower() in usable:
                by_pool.setdefault(job.pool_id.lower(), []).append(job)
        for pool_key, jobs in by_pool.items():
            pool = self.account.pools[pool_key]
            nodes = usable[pool_key]
            jobs.sort(key=lambda job: (-int(job.spec.get("priority", 0)), job.creation_time))
            spread = pool.spec["taskSchedulingPolicy"]["nodeFillType"] == "Spread"
            for job in jobs:
                self._schedule_job(job, pool, nodes, spread)

    def _schedule_job(self, job: Job, pool: Pool, nodes: list[ComputeNode], spread: bool) -> None:
        limit = int(job.spec.get("maxParallelTasks", -1))
        never_here: list[Task] = []
        while job.ready:
            task = job.ready[0]
            if task.state != ACTIVE or job.tasks.get(task.key) is not task:
                job.ready.popleft()
                continue
            if limit != -1 and job.running_count() >= limit:
                break
            if task.is_multi_instance:
                if not hosts_multi_instance_tasks(pool):
                    # It stays active for good (as on the service), but must not hold up the job's other tasks.
                    never_here.append(job.ready.popleft())
                    continue
                picked = pick_instance_nodes(nodes, task, job)
                if picked is None:
                    break
                job.ready.popleft()
                self.multi_instance.launch(task, picked)
                continue
            node = pick_node(nodes, task, spread, job)
            if node is None:
                break
            job.ready.popleft()
            self.execution.launch(task, node)
        job.ready.extendleft(reversed(never_here))
