"""What the pools a job used cost while their nodes ran no task during the run, sampled as the job is watched.
No I/O.

Batch keeps no history of a node's states, so the watch lists the pool's nodes now and then (at its first look,
every ``NODE_SAMPLE_SECONDS``, when the job's task counts move but not more often than every
``MOVED_SAMPLE_SECONDS``, and once more when the run reports) and counts, between two samples, the nodes the
earlier one saw: paid ones (every state but ``preempted`` and ``deallocated``, which Azure does not bill), and
idle ones among them (paid, running no task: idle, but also booting, running their start task, unusable...).
A node allocated since the earlier sample (a pool scaling up from zero during a short run) counts from its
allocation time, idle until it entered the running state or all along. An estimate: a node that came and went
between two samples is not seen. On a shared pool the idle nodes are the pool's, whoever's work they were
waiting for.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_azbatch.model.records import NodeTimes, epoch_seconds
from airflow_provider_azbatch.watching.state import WatchState

NODE_SAMPLE_SECONDS = 60.0
MOVED_SAMPLE_SECONDS = 10.0
UNPAID_STATES = ("preempted", "deallocated")
KINDS = ("dedicated", "spot")


def _record(state: WatchState, pool_id: str, now: float) -> dict[str, Any]:
    return state.pool_idle.setdefault(
        pool_id,
        {
            "first": now,
            "at": None,
            "idle": dict.fromkeys(KINDS, 0),
            "paid": dict.fromkeys(KINDS, 0),
            "idle_seconds": dict.fromkeys(KINDS, 0.0),
            "paid_seconds": dict.fromkeys(KINDS, 0.0),
        },
    )


def sample_due(state: WatchState, pool_id: str, now: float, moved: bool) -> bool:
    record = state.pool_idle.get(pool_id)
    if record is None or record["at"] is None:
        return True
    since = now - record["at"]
    return since >= NODE_SAMPLE_SECONDS or (moved and since >= MOVED_SAMPLE_SECONDS)


def sample(state: WatchState, pool_id: str, nodes: list[NodeTimes] | None, now: float) -> None:
    """Count the span since the last sample with what it saw, and keep what this one sees (None: the pool is
    gone, so its nodes are)."""
    record = _record(state, pool_id, now)
    before = record["at"]
    if before is not None:
        span = max(0.0, now - before)
        for kind in KINDS:
            record["idle_seconds"][kind] += span * record["idle"][kind]
            record["paid_seconds"][kind] += span * record["paid"][kind]
        for node in nodes or []:
            _count_arrival(record, node, before, now)
    idle = dict.fromkeys(KINDS, 0)
    paid = dict.fromkeys(KINDS, 0)
    for node in nodes or []:
        if node.state in UNPAID_STATES:
            continue
        kind = "dedicated" if node.dedicated else "spot"
        paid[kind] += 1
        idle[kind] += int(node.state != "running")
    record.update(at=now, idle=idle, paid=paid)


def _count_arrival(record: dict[str, Any], node: NodeTimes, before: float, now: float) -> None:
    """A paid node allocated between the samples ``before`` and ``now``, which the earlier one could not count:
    paid since its allocation, idle until it started running (or until now)."""
    allocated = epoch_seconds(node.allocated)
    if node.state in UNPAID_STATES or allocated is None or not before < allocated < now:
        return
    kind = "dedicated" if node.dedicated else "spot"
    record["paid_seconds"][kind] += now - allocated
    running_since = epoch_seconds(node.state_since) if node.state == "running" else None
    idle_until = now if running_since is None else min(now, max(allocated, running_since))
    record["idle_seconds"][kind] += idle_until - allocated
