"""What the pools a job used cost while their nodes ran no task during the run, sampled as the job is watched.
No I/O.

Batch keeps no history of a node's states, so the watch lists the pool's nodes now and then (at its first look,
every ``NODE_SAMPLE_SECONDS``, when the job's task counts move but not more often than every
``MOVED_SAMPLE_SECONDS``, and once more when the run reports, or when the job leaves the pool for another: a Spot
fallback, where the figures of the pool it left end) and counts, between two samples, each node's paid time and
the part of it in which no task ran. Paid: from its allocation (or the earlier sample) until the later sample, or
until it was preempted or deallocated (Azure bills neither), and from its next boot if it came back. Busy: the
times its recent tasks ran (any job's: on a shared pool a node running another job's task is not idle) and the
job's attempts lost to preemptions (a preempted node that came back lists none), or, where the listing names
none, its state since its last transition. A node that left the pool between two samples is counted as the
earlier one saw it until the later one, and one that came and went between them is not seen: an estimate, exact
for nodes that stay listed.
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
            "nodes": {},
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


def _kind(node: NodeTimes) -> str:
    return "dedicated" if node.dedicated else "spot"


def sample(state: WatchState, pool_id: str, nodes: list[NodeTimes] | None, now: float, left: bool = False) -> None:
    """Count the span since the last sample, and keep what this one sees (None: the pool is gone, so its nodes
    are). ``left``: the job leaves the pool (a Spot fallback): the figures end with this sample."""
    record = _record(state, pool_id, now)
    if record.get("left"):
        return
    before = record["at"]
    seen: dict[str, list[Any]] = record.setdefault("nodes", {})
    listed = nodes or []
    if before is not None and now > before:
        lost = _lost_attempts(state)
        for node in listed:
            paid, busy = _node_span(node, seen.get(node.id), before, now, lost.get(node.id, []))
            record["paid_seconds"][_kind(node)] += paid
            record["idle_seconds"][_kind(node)] += paid - busy
        ids = {node.id for node in listed}
        for node_id, (kind, was_paid, was_running) in seen.items():
            if node_id not in ids and was_paid:  # it left the pool since: as the earlier sample saw it
                record["paid_seconds"][kind] += now - before
                record["idle_seconds"][kind] += 0.0 if was_running else now - before
    record["nodes"] = {
        node.id: [_kind(node), node.state not in UNPAID_STATES, node.state == "running"] for node in listed
    }
    record["at"] = now
    record["left"] = left


def _lost_attempts(state: WatchState) -> dict[str, list[tuple[str | None, str | None]]]:
    """Per node, the job's attempts lost to preemptions and requeues: a preempted node that came back lists none."""
    lost: dict[str, list[tuple[str | None, str | None]]] = {}
    for requeue in (state.spot or {}).get("requeues", []):
        if requeue.get("node"):
            lost.setdefault(requeue["node"], []).append((requeue.get("start"), requeue.get("end")))
    return lost


def _node_span(
    node: NodeTimes, earlier: list[Any] | None, before: float, now: float, lost: list[tuple[str | None, str | None]]
) -> tuple[float, float]:
    """(paid, busy) seconds of a listed node between the samples ``before`` and ``now``."""
    start = max(before, epoch_seconds(node.allocated) or before)
    was_paid = earlier is None or earlier[1]
    if not was_paid and node.state not in UNPAID_STATES:
        # Unpaid at the earlier sample (preempted), back since: paid from its boot.
        start = max(start, epoch_seconds(node.last_boot) or now)
    end = now
    if node.state in UNPAID_STATES:
        since = epoch_seconds(node.state_since)
        if not was_paid:
            return 0.0, 0.0
        end = min(now, since) if since is not None else now
    if end <= start:
        return 0.0, 0.0
    return end - start, _busy(node, earlier, start, end, lost)


def _busy(
    node: NodeTimes, earlier: list[Any] | None, start: float, end: float, lost: list[tuple[str | None, str | None]]
) -> float:
    """The time within [start, end] in which the node ran at least one task (overlapping tasks count once)."""
    spans = [(epoch_seconds(s), epoch_seconds(e) if e else end) for s, e in [*node.task_spans, *lost]]
    since = epoch_seconds(node.state_since)
    if node.state == "running":
        spans.append((since if since is not None else start, end))
    elif earlier is not None and earlier[2] and since is not None:
        spans.append((start, since))  # running at the earlier sample, until its last transition
    clipped = sorted((max(start, s), min(end, e)) for s, e in spans if s is not None and e is not None)
    busy, reach = 0.0, start
    for s, e in clipped:
        s = max(s, reach)
        if e > s:
            busy += e - s
            reach = e
    return busy
