"""What the local Batch service recorded of a run's nodes and tasks, read through the SDK as it happens: the figures
a run reports (cost, idle time, Spot losses) are checked against these, not against each other.

A recorder polls the pools' nodes and the job's tasks every ``INTERVAL`` seconds: each node's allocation time, its
states with their transition times (``stateTransitionTime``), when it was last listed; each task attempt's node,
start and end. Preemptions are the times the test asked for them (the admin API's call), which a poll could miss
where the node comes back within one interval.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass, field

INTERVAL = 0.2
UNPAID = ("preempted", "deallocated")


@dataclass
class NodeSeen:
    pool: str
    dedicated: bool
    allocated: float
    states: list[tuple[str, float]] = field(default_factory=list)  # (state, since), in order
    last_seen: float = 0.0


@dataclass
class Attempt:
    node: str
    start: float
    end: float | None = None


def _epoch(value) -> float | None:  # type: ignore[no-untyped-def]
    return value.timestamp() if value is not None else None


class Recorder(threading.Thread):
    def __init__(self, client, pools: list[str] | None = None) -> None:  # type: ignore[no-untyped-def]
        """``pools``: those to record (None: every pool, for a job's auto pool whose id is not known before)."""
        super().__init__(daemon=True)
        self.client, self.pools = client, pools
        self.nodes: dict[str, NodeSeen] = {}
        self.attempts: dict[tuple[str, str, float], Attempt] = {}
        self.preempted: dict[str, float] = {}  # node -> when the test preempted it
        self.stop = threading.Event()
        self.errors: list[BaseException] = []
        self.listed: set[str] = set()  # the nodes the latest poll listed

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self._poll()
            except Exception as exc:  # reported by the test
                self.errors.append(exc)
            time.sleep(INTERVAL)

    def _poll(self) -> None:
        from azure.core.exceptions import ResourceNotFoundError

        listing: set[str] = set()
        pools = self.pools if self.pools is not None else [pool.id for pool in self.client.list_pools(select=["id"])]
        for pool in pools:
            try:
                listed = list(self.client.list_nodes(pool))
            except ResourceNotFoundError:
                continue
            now = time.time()
            listing |= {node.id for node in listed}
            for node in listed:
                seen = self.nodes.setdefault(
                    node.id, NodeSeen(pool, bool(node.is_dedicated), _epoch(node.allocation_time) or now)
                )
                entry = (str(getattr(node.state, "value", node.state)), _epoch(node.state_transition_time) or now)
                if not seen.states or seen.states[-1] != entry:
                    seen.states.append(entry)
                seen.last_seen = now
        for job in self.client.list_jobs(filter="state eq 'active'", select=["id", "poolInfo", "executionInfo"]):
            pools_of_job = {job.execution_info.pool_id if job.execution_info else None}
            pools_of_job.add(job.pool_info.pool_id if job.pool_info else None)
            if self.pools is not None and not pools_of_job & set(self.pools):
                continue
            with contextlib.suppress(ResourceNotFoundError):  # deleted since it was listed
                self.read_job(job.id)
        self.listed = listing

    def read_job(self, job_id: str) -> None:
        """The job's task attempts as the service has them now (a run's last ones: after it ended)."""
        for task in self.client.list_tasks(job_id, select=["id", "executionInfo", "nodeInfo"]):
            info = task.execution_info
            if info is None or info.start_time is None or task.node_info is None:
                continue
            key = (job_id, task.id, info.start_time.timestamp())
            attempt = self.attempts.setdefault(key, Attempt(task.node_info.node_id, key[2]))
            attempt.end = _epoch(info.end_time)

    def finish(self) -> None:
        self.stop.set()
        self.join(timeout=10)
        assert self.errors == [], self.errors[:1]

    # -- what the records add up to ----------------------------------------------------------------------------
    def paid(self, node_id: str, until: float) -> list[tuple[float, float]]:
        """The node's paid intervals up to ``until`` (or until it was last listed, if it left the pool)."""
        seen = self.nodes[node_id]
        end = until if node_id in self.listed else min(until, seen.last_seen + INTERVAL / 2)
        out = []
        states = list(seen.states)
        preempted = self.preempted.get(node_id)
        for i, (state, since) in enumerate(states):
            start = seen.allocated if i == 0 else since
            stop = states[i + 1][1] if i + 1 < len(states) else end
            if state in UNPAID:
                continue
            if preempted is not None and start <= preempted < stop:
                stop = preempted  # a preemption the polls did not see (the node came back within one)
            if stop > start:
                out.append((start, stop))
        return out

    def busy(self, node_id: str) -> list[tuple[float, float]]:
        """When the job's task attempts ran on the node: until their end, or until the node was preempted."""
        out = []
        for attempt in self.attempts.values():
            if attempt.node != node_id:
                continue
            end = attempt.end if attempt.end is not None else self.preempted.get(node_id)
            if end is not None:
                out.append((attempt.start, end))
        return out

    def figures(self, pool: str, since: float, until: float) -> tuple[float, float]:
        """(paid, idle) node-seconds of the pool's nodes within [since, until]."""
        paid = idle = 0.0
        for node_id, seen in self.nodes.items():
            if seen.pool != pool:
                continue
            node_paid = _clip(self.paid(node_id, until), since, until)
            node_busy = _clip(_within(self.busy(node_id), node_paid), since, until)
            paid += _length(node_paid)
            idle += _length(node_paid) - _length(node_busy)
        return paid, idle


def _clip(spans: list[tuple[float, float]], since: float, until: float) -> list[tuple[float, float]]:
    return [(max(s, since), min(e, until)) for s, e in spans if min(e, until) > max(s, since)]


def _within(spans: list[tuple[float, float]], outer: list[tuple[float, float]]) -> list[tuple[float, float]]:
    return [(max(s, a), min(e, b)) for s, e in spans for a, b in outer if min(e, b) > max(s, a)]


def _length(spans: list[tuple[float, float]]) -> float:
    total, reach = 0.0, float("-inf")
    for s, e in sorted(spans):
        s = max(s, reach)
        if e > s:
            total += e - s
            reach = e
    return total
