"""Spot nodes: preemption, and the Spot capacity Azure has for the account.

As https://learn.microsoft.com/azure/batch/batch-spot-vms describes it: a preempted node's state becomes
``preempted``, its VM is deleted (its local data is lost) but the node is still listed and still counted in
``currentLowPriorityNodes``; the tasks that ran on it are requeued and run again when capacity returns; the pool
keeps seeking its target of Spot nodes, and a preempted node that gets capacity back keeps its id and goes through
``creating`` and ``starting`` again.

Locally, ``spot_capacity`` (the administration API's ``/_emulator/spot``) is how many Spot nodes of the account
can be up at once (None: as many as asked for); a pool short of its Spot target for want of capacity stays
``resizing`` and gets nodes as capacity returns, preempted ones first. A preemption is asked for on the
administration API (``/_emulator/pools/{pool}/nodes/{node}/preempt``).
"""

from __future__ import annotations

import asyncio

from .account import Account
from .allocation import Allocation
from .errors import conflict
from .pools import CREATING, IDLE, POOL_DELETING, PREEMPTED, RUNNING, ComputeNode, Pool


class Spot:
    def __init__(self, account: Account, allocation: Allocation) -> None:
        self.account = account
        self.allocation = allocation
        allocation.spot_room = self.room
        allocation.spot_freed = self.capacity_changed

    def room(self) -> int | None:
        """How many more Spot nodes can be up now (None: no limit)."""
        capacity = self.account.settings.spot_capacity
        if capacity is None:
            return None
        up = sum(
            1
            for pool in self.account.pools.values()
            for node in pool.nodes.values()
            if not node.is_dedicated and node.state != PREEMPTED
        )
        return max(0, capacity - up)

    def preempt(self, node: ComputeNode) -> None:
        """Azure takes the node's VM back: the node is ``preempted``, its running tasks are requeued."""
        if node.is_dedicated:
            raise conflict("NodeNotSpot", f"Node {node.id} is a dedicated node: only Spot nodes are preempted.")
        if node.state not in (IDLE, RUNNING) or node.leaving:
            # Azure may take a VM back while it boots too; locally a node is preempted once it is up, so that a
            # test knows what it preempts.
            raise conflict(
                "NodeNotPreemptible",
                f"Node {node.id} is {'leaving its pool' if node.leaving else node.state}: only a node that is idle "
                "or running can be preempted here.",
            )
        node.set_state(PREEMPTED)
        node.last_boot_time = None
        node.start_task_info = None
        node.errors = []
        for task in list(node.running.values()):
            task.end_reason = "preempted"
        self.account.spawn(self._lose_vm(node))

    async def _lose_vm(self, node: ComputeNode) -> None:
        # A multi-instance task ends on all its nodes when one of them goes, and is requeued whole.
        runner = self.account.runner
        for task in list(node.running.values()):
            await asyncio.gather(*(runner.terminate(handle) for handle in task.run_handles()))
        while node.running:
            await asyncio.sleep(self.account.settings.tick_seconds)
        node.dirs.remove()
        self.allocation.check(node.pool)
        self.account.kick()
        self.capacity_changed()

    def capacity_changed(self) -> None:
        """Spot capacity may be there again: preempted nodes come back first, then pools get the nodes they seek."""
        for pool in list(self.account.pools.values()):
            if pool.state == POOL_DELETING:
                continue
            for node in [node for node in pool.nodes.values() if node.state == PREEMPTED and not node.leaving]:
                room = self.room()
                if room is not None and room <= 0:
                    return
                self._recover(node)
            if pool.seeking_spot:
                self.allocation.resize(pool)

    def _recover(self, node: ComputeNode) -> None:
        node.set_state(CREATING)
        node.recovering = True
        self.account.spawn(self.allocation.boot(node))
        pool: Pool = node.pool
        self.allocation.check(pool)
