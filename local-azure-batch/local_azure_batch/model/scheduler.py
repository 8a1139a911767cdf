"""Which ready tasks start where: jobs by priority, then as the pool's ``jobDefaultOrder`` says; tasks in order
onto nodes with free slots.

A higher-priority job's tasks take the free slots of a busy pool before any task of a lower-priority one (running
tasks are not preempted). Among jobs of equal priority, ``creationtime`` serves the oldest job first; ``none``
(the service's default) takes one task from each in turn, so equal jobs share the pool "uniformly", as the REST
reference puts it.
"""

from __future__ import annotations

import logging
from itertools import groupby

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
            policy = pool.spec["taskSchedulingPolicy"]
            spread = policy["nodeFillType"] == "Spread"
            by_age = policy.get("jobDefaultOrder") == "creationtime"
            for _, group in groupby(
                sorted(jobs, key=lambda job: (-int(job.spec.get("priority", 0)), job.creation_time)),
                key=lambda job: int(job.spec.get("priority", 0)),
            ):
                equal = list(group)
                if by_age or len(equal) == 1:
                    for job in equal:
                        self._schedule_job(job, pool, nodes, spread)
                    continue
                self._take_turns(equal, pool, nodes, spread)

    def _take_turns(self, jobs: list[Job], pool: Pool, nodes: list[ComputeNode], spread: bool) -> None:
        """One task of each job in turn, starting after the job served last (passes often start one task only),
        until none of them can start another."""
        keys = [job.key for job in jobs]
        last = pool.served_last.get(int(jobs[0].spec.get("priority", 0)))
        start = keys.index(last) + 1 if last in keys else 0
        turns = jobs[start:] + jobs[:start]
        while True:
            started = False
            for job in turns:
                if self._schedule_job(job, pool, nodes, spread, budget=1):
                    pool.served_last[int(job.spec.get("priority", 0))] = job.key
                    started = True
            if not started:
                return

    def _schedule_job(
        self, job: Job, pool: Pool, nodes: list[ComputeNode], spread: bool, budget: int | None = None
    ) -> int:
        """Start ready tasks of ``job`` (at most ``budget``); how many started."""
        limit = int(job.spec.get("maxParallelTasks", -1))
        never_here: list[Task] = []
        started = 0
        while job.ready and (budget is None or started < budget):
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
                started += 1
                continue
            node = pick_node(nodes, task, spread, job)
            if node is None:
                break
            job.ready.popleft()
            self.execution.launch(task, node)
            started += 1
        job.ready.extendleft(reversed(never_here))
        return started
