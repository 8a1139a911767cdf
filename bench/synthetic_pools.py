"""Pools, nodes and task slots for the synthetic Batch endpoint (``bench/synthetic_batch.py``).

A pool has ``nodes`` nodes of ``slots`` task slots each (``taskSlotsPerNode``). Its tasks take slots in the order
they were created: a task starts when a slot is free (at once, or when an earlier task ends), and waits
(``active``) until then; it ends when its job ends (the harness says when: ``Job.end``). Everything is computed
from the clock once the ends are known (``schedule``), so a listing at any moment says what the service would:
each node's running tasks, the tasks it ran and ran successfully, its state (``running`` or ``idle``), and its
``recentTasks``, the last ``RECENT_TASKS`` tasks whose state changed on it (started or ended), in the service's
shape (``taskUrl``, ``jobId``, ``taskId``, ``taskState``, ``executionInfo``; ``subtaskId`` only for the subtasks of
multi-instance tasks, which the endpoint has none of, as the local Batch service models it).

A pool can refuse its reads (``fail``: ``"403"``, a credential without the pool's node reads: ``403
AuthorizationFailure``; ``"404"``, the pool is gone: ``404 PoolNotFound``), as a scenario switch.
"""

from __future__ import annotations

import bisect
import hashlib
import heapq
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Protocol

INF = math.inf
RECENT_TASKS = 5  # entries of a node's recentTasks (not documented; the local Batch service keeps 5)
MAX_SLOTS = 256  # Batch's largest taskSlotsPerNode


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Placed(Protocol):
    """A task as the pool places it."""

    id: str
    created: float
    start: float
    end: float
    node: Node | None

    @property
    def job_id(self) -> str: ...

    def state(self, now: float) -> str: ...

    def execution(self, now: float) -> dict[str, Any]: ...


@dataclass
class Node:
    pool: Pool
    index: int
    allocated: float
    id: str = ""
    starts: list[float] = field(default_factory=list)  # sorted start times of the tasks it ran
    ends: list[float] = field(default_factory=list)  # sorted end times (inf: not ending)
    events: list[tuple[float, int, Placed]] = field(default_factory=list)  # (time, order, task): starts and ends
    times: list[float] = field(default_factory=list)  # the events' times, for bisect

    def __post_init__(self) -> None:
        digest = hashlib.sha256(f"{self.pool.account}/{self.pool.id}/{self.index}".encode()).hexdigest()
        self.id = f"tvmps_{digest}_d"

    def running(self, now: float) -> int:
        return bisect.bisect_right(self.starts, now) - bisect.bisect_right(self.ends, now)

    def recent(self, now: float) -> list[Placed]:
        """The last tasks whose state changed on the node by ``now``, oldest first."""
        out: list[Placed] = []
        at = bisect.bisect_right(self.times, now)
        while at > 0 and len(out) < RECENT_TASKS:
            at -= 1
            task = self.events[at][2]
            if task not in out:
                out.append(task)
        return out[::-1]

    def changed_at(self, now: float) -> float:
        at = bisect.bisect_right(self.times, now)
        return self.times[at - 1] if at else self.allocated

    def to_wire(self, base: str, now: float) -> dict[str, Any]:
        running = self.running(now)
        pool = self.pool
        url = f"{base}/pools/{pool.id}/nodes/{self.id}"
        out: dict[str, Any] = {
            "id": self.id,
            "url": url,
            "state": "running" if running else "idle",
            "schedulingState": "enabled",
            "stateTransitionTime": iso(self.changed_at(now)),
            "lastBootTime": iso(self.allocated + 60),
            "allocationTime": iso(self.allocated),
            "ipAddress": f"10.0.{self.index // 250}.{4 + self.index % 250}",
            "affinityId": f"TVM:{self.id}",
            "vmSize": pool.vm_size,
            "totalTasksRun": bisect.bisect_right(self.starts, now),
            "totalTasksSucceeded": bisect.bisect_right(self.ends, now),
            "runningTasksCount": running,
            "runningTaskSlotsCount": running,
            "isDedicated": True,
            "nodeAgentInfo": {"lastUpdateTime": iso(self.allocated + 60), "version": "1.12.34"},
            "virtualMachineInfo": {
                "imageReference": {
                    "publisher": "canonical",
                    "offer": "0001-com-ubuntu-server-jammy",
                    "sku": "22_04-lts",
                    "version": "latest",
                    "exactVersion": "22.04.202511250",
                }
            },
        }
        recent = self.recent(now)
        if recent:
            out["recentTasks"] = [
                {
                    "taskUrl": f"{base}/jobs/{task.job_id}/tasks/{task.id}",
                    "jobId": task.job_id,
                    "taskId": task.id,
                    "taskState": task.state(now),
                    "executionInfo": task.execution(now),
                }
                for task in recent
            ]
        return out


@dataclass
class Pool:
    id: str
    account: str
    nodes_count: int
    slots: int
    created: float
    fail: str | None = None  # "403" | "404": its reads are refused / it is gone
    vm_size: str = "standard_d2s_v3"
    nodes: list[Node] = field(default_factory=list)
    tasks: list[Placed] = field(default_factory=list)  # in the order they were created

    def __post_init__(self) -> None:
        self.nodes = [Node(self, i, self.created - 600) for i in range(self.nodes_count)]

    def schedule(self) -> None:
        """Place every task on a slot: the earliest free one, from its creation on; a task whose slot never frees
        waits for good (``start`` inf)."""
        # (free from, slot, node): the next task goes to the least loaded node, as Batch's default fill (Spread).
        free = [(self.created - 600, s, n) for n in range(self.nodes_count) for s in range(self.slots)]
        heapq.heapify(free)
        for node in self.nodes:
            node.starts, node.ends, node.events = [], [], []
        for task in self.tasks:
            free_at, s, n = heapq.heappop(free)
            if free_at == INF:
                task.start, task.end, task.node = INF, INF, None
                heapq.heappush(free, (free_at, s, n))
                continue
            node = self.nodes[n]
            task.node = node
            task.start = max(task.created, free_at)
            task.end = max(task.end, task.start)
            node.starts.append(task.start)
            node.ends.append(task.end)
            node.events.append((task.start, len(node.events), task))
            if task.end != INF:
                node.events.append((task.end, len(node.events), task))
            heapq.heappush(free, (task.end, s, n))
        for node in self.nodes:
            node.starts.sort()
            node.ends.sort()
            node.events.sort(key=lambda event: (event[0], event[1]))
            node.times = [event[0] for event in node.events]

    def to_wire(self, base: str, now: float) -> dict[str, Any]:
        return {
            "id": self.id,
            "url": f"{base}/pools/{self.id}",
            "eTag": "0x8DE2CBEB1A2B3C5",
            "lastModified": iso(self.created),
            "creationTime": iso(self.created),
            "state": "active",
            "stateTransitionTime": iso(self.created),
            "allocationState": "steady",
            "allocationStateTransitionTime": iso(self.created + 120),
            "vmSize": self.vm_size,
            "resizeTimeout": "PT15M",
            "currentDedicatedNodes": self.nodes_count,
            "currentLowPriorityNodes": 0,
            "targetDedicatedNodes": self.nodes_count,
            "targetLowPriorityNodes": 0,
            "enableAutoScale": False,
            "enableInterNodeCommunication": False,
            "taskSlotsPerNode": self.slots,
            "taskSchedulingPolicy": {"nodeFillType": "Spread"},
            "virtualMachineConfiguration": {
                "imageReference": {
                    "publisher": "canonical",
                    "offer": "0001-com-ubuntu-server-jammy",
                    "sku": "22_04-lts",
                    "version": "latest",
                },
                "nodeAgentSKUId": "batch.node.ubuntu 22.04",
            },
        }


def pool_for(j: int, accounts: int, pools: int) -> int:
    """Which of an account's ``pools`` job ``j`` runs on (jobs are dealt to the accounts first)."""
    return (j // accounts) % pools


def sized(tasks: int, nodes: int) -> int:
    """Slots a node needs for ``tasks`` tasks over ``nodes`` nodes to all run at once (at most ``MAX_SLOTS``)."""
    return max(1, min(MAX_SLOTS, -(-tasks // max(1, nodes))))
