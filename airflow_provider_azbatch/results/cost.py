"""What a job cost, estimated from the service's node and task times and the catalog's list prices. No I/O.

Batch bills node time. A pool made for the job (auto pool) is the job's alone: its nodes' time, from
allocation until they left the pool (or the job ended, taking the pool with it), is what the job cost,
and the time no task ran on them is paid idle time. A shared or existing pool serves other jobs too: the
job is charged for its tasks' time at the node's price per task slot.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from airflow_provider_azbatch.compute import VmCatalog
from airflow_provider_azbatch.compute.errors import UnknownVmSizeError
from airflow_provider_azbatch.model.outcomes import TaskOutcome


@dataclass(frozen=True)
class NodeSpan:
    """One node's paid time: allocated, until it left the pool (or the job's end)."""

    node_id: str
    dedicated: bool
    start: datetime
    end: datetime

    @property
    def seconds(self) -> float:
        return max(0.0, (self.end - self.start).total_seconds())


@dataclass
class CostReport:
    basis: str  # "node time" (auto pool) or "task time per slot" (shared or existing pool)
    vm_size: str
    region: str
    prices_date: str
    node_seconds: dict[str, float] = field(default_factory=dict)  # "dedicated" / "spot" -> seconds
    task_seconds: float = 0.0
    busy_node_seconds: float | None = None
    estimate_usd: float | None = None
    hourly_usd: float | None = None
    slots_per_node: int = 1

    @property
    def idle_share(self) -> float | None:
        paid = sum(self.node_seconds.values())
        if self.busy_node_seconds is None or paid <= 0:
            return None
        return max(0.0, 1 - self.busy_node_seconds / paid)

    def to_json(self) -> dict[str, Any]:
        return {
            "estimate_usd": None if self.estimate_usd is None else round(self.estimate_usd, 4),
            "basis": self.basis,
            "vm_size": self.vm_size,
            "region": self.region,
            "prices_date": self.prices_date,
            "node_seconds": {key: round(value, 1) for key, value in self.node_seconds.items()},
            "task_seconds": round(self.task_seconds, 1),
            "idle_share": None if self.idle_share is None else round(self.idle_share, 3),
        }

    def lines(self) -> list[str]:
        # From the values the XCom holds, so that the log and the XCom never disagree in a rounded digit
        # (an idle share of 0.33497 is 0.335 in the XCom: 34 %, not 33 %).
        shown = self.to_json()
        price = (
            f"${shown['estimate_usd']:.4f}"
            if shown["estimate_usd"] is not None
            else f"no estimate ({self.vm_size} is not in the catalog)"
        )
        lines = [
            f"Cost estimate: {price} (list prices, {self.region}, as of {self.prices_date}; spot and low-priority "
            "nodes at the list price, an upper bound)"
        ]
        for priority, seconds in sorted(shown["node_seconds"].items()):
            lines.append(f"  node time: {seconds / 3600:.3f} h of {self.vm_size} ({priority})")
        lines.append(f"  Batch task time: {shown['task_seconds'] / 3600:.3f} h")
        if self.basis == "task time per slot":
            lines.append(
                f"  the pool is shared: charged by task time x the node's price per slot ({self.vm_size}, "
                f"{self.slots_per_node} slot(s) per node"
                + (f", ${self.hourly_usd:.4f}/h per node)" if self.hourly_usd is not None else ")")
            )
        elif shown["idle_share"] is not None:
            lines.append(f"  idle: {shown['idle_share']:.0%} of the paid node time ran no task")
        return lines


@dataclass(frozen=True)
class IdlePool:
    """What a pool the run used cost while its nodes ran no task, during the run."""

    pool_id: str
    vm_size: str | None
    idle_node_seconds: float
    paid_node_seconds: float
    hourly_usd: float | None
    how: str  # "node time" (a pool made for the job: exact) or "sampled" (see watching/idle_time.py)
    # Sampled: the first and last sample (epoch seconds), the span the figures cover.
    sampled: tuple[float, float] | None = None

    @property
    def idle_usd(self) -> float | None:
        return None if self.hourly_usd is None else self.idle_node_seconds / 3600 * self.hourly_usd

    def to_json(self) -> dict[str, Any]:
        return {
            "vm_size": self.vm_size,
            "idle_node_seconds": round(self.idle_node_seconds, 1),
            "paid_node_seconds": round(self.paid_node_seconds, 1),
            "idle_usd": None if self.idle_usd is None else round(self.idle_usd, 6),
            "how": self.how,
            **({"from": _iso(self.sampled[0]), "to": _iso(self.sampled[1])} if self.sampled else {}),
        }

    def line(self) -> str:
        shown = self.to_json()  # as the XCom has them, so that the two agree to the last digit
        price = f", about ${shown['idle_usd']:.4f} at list prices" if shown["idle_usd"] is not None else ""
        size = f" ({self.vm_size})" if self.vm_size else ""
        how = "its node time" if self.how == "node time" else "its nodes sampled as the job ran"
        return (
            f"  pool {self.pool_id}{size}: {shown['idle_node_seconds'] / 3600:.3f} of "
            f"{shown['paid_node_seconds'] / 3600:.3f} paid node-h idle{price} ({how})"
        )


def idle_pool_lines(pools: Iterable[IdlePool]) -> list[str]:
    """The log's lines on what the run's pools cost idle (none when no pool was seen)."""
    pools = list(pools)
    if not pools:
        return []
    known = [pool.to_json()["idle_usd"] for pool in pools if pool.idle_usd is not None]
    head = "Idle nodes during the run (paid, running no task)"
    if known:
        head += f": ${sum(known):.4f} at list prices"
    return [head, *(pool.line() for pool in pools)]


def sampled_idle_pool(pool_id: str, record: Mapping[str, Any], vm_size: str | None, catalog: VmCatalog) -> IdlePool:
    """A pool's idle time from the watch's samples (``WatchState.pool_idle``)."""
    hourly = _hourly(catalog, vm_size) if vm_size else None
    return IdlePool(
        pool_id,
        vm_size,
        sum(record["idle_seconds"].values()),
        sum(record["paid_seconds"].values()),
        hourly,
        "sampled",
        (record["first"], record["at"]) if record.get("at") is not None else None,
    )


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat()


def auto_pool_idle(pool_id: str, report: CostReport) -> IdlePool:
    """A pool made for the job: its paid node time in which no task ran (the cost report's idle share)."""
    paid = sum(report.node_seconds.values())
    busy = report.busy_node_seconds or 0.0
    return IdlePool(pool_id, report.vm_size, max(0.0, paid - busy), paid, report.hourly_usd, "node time")


def node_spans(records: Mapping[str, Mapping[str, Any]], ended: datetime) -> list[NodeSpan]:
    """The paid time of each node the watch saw: until it left the pool, or until the job ended (its pool
    goes with it; Batch stops billing once the node is deallocated, a little later: an estimate)."""
    spans = []
    for node_id, record in records.items():
        start = datetime.fromisoformat(record["allocated"])
        end = datetime.fromisoformat(record["seen"]) if record.get("gone") else ended
        spans.append(NodeSpan(node_id, bool(record.get("dedicated", True)), start, max(start, end)))
    return spans


def _busy_seconds(outcomes: Iterable[TaskOutcome]) -> float:
    """Per node, the time at least one task ran on it (overlapping tasks count once)."""
    spans: dict[str, list[tuple[datetime, datetime]]] = defaultdict(list)
    for outcome in outcomes:
        if outcome.node_id and outcome.start_time and outcome.end_time:
            spans[outcome.node_id].append(
                (datetime.fromisoformat(outcome.start_time), datetime.fromisoformat(outcome.end_time))
            )
    busy = 0.0
    for intervals in spans.values():
        intervals.sort()
        start, end = intervals[0]
        for next_start, next_end in intervals[1:]:
            if next_start > end:
                busy += (end - start).total_seconds()
                start, end = next_start, next_end
            else:
                end = max(end, next_end)
        busy += (end - start).total_seconds()
    return busy


def _hourly(catalog: VmCatalog, vm_size: str) -> float | None:
    try:
        return catalog.get(vm_size).hourly_usd
    except UnknownVmSizeError:
        return None


def auto_pool_cost(
    vm_size: str, nodes: Iterable[NodeSpan], outcomes: Iterable[TaskOutcome], catalog: VmCatalog
) -> CostReport:
    """A pool made for the job: every node-second was the job's."""
    outcomes = list(outcomes)
    node_seconds: dict[str, float] = defaultdict(float)
    for node in nodes:
        node_seconds["dedicated" if node.dedicated else "spot"] += node.seconds
    return _priced(
        "node time",
        vm_size,
        catalog,
        node_seconds,
        sum(node_seconds.values()),
        task_seconds=sum(o.duration_seconds or 0.0 for o in outcomes),
        busy_node_seconds=_busy_seconds(outcomes),
    )


def shared_pool_cost(
    vm_size: str,
    slots_per_node: int,
    dedicated_nodes: Mapping[str, bool],
    outcomes: Iterable[TaskOutcome],
    catalog: VmCatalog,
    required_slots: Mapping[str, int] | None = None,
) -> CostReport:
    """A pool other jobs use too: the job pays its tasks' time at the node's price per slot."""
    node_seconds: dict[str, float] = defaultdict(float)
    slot_seconds = 0.0
    task_seconds = 0.0
    for outcome in outcomes:
        seconds = outcome.duration_seconds or 0.0
        slots = (required_slots or {}).get(outcome.id, 1)
        task_seconds += seconds
        slot_seconds += seconds * slots
        priority = "dedicated" if dedicated_nodes.get(outcome.node_id or "", True) else "spot"
        node_seconds[priority] += seconds * slots / slots_per_node
    return _priced(
        "task time per slot",
        vm_size,
        catalog,
        node_seconds,
        slot_seconds,
        per_node=slots_per_node,
        task_seconds=task_seconds,
        slots_per_node=slots_per_node,
    )


def _priced(
    basis: str,
    vm_size: str,
    catalog: VmCatalog,
    node_seconds: Mapping[str, float],
    paid_seconds: float,
    *,
    per_node: int = 1,
    **measured: Any,
) -> CostReport:
    """The report of ``paid_seconds`` of nodes (or of slots, ``per_node`` to a node) at the catalog's price."""
    hourly = _hourly(catalog, vm_size)
    return CostReport(
        basis=basis,
        vm_size=vm_size,
        region=catalog.region,
        prices_date=catalog.retrieved,
        node_seconds=dict(node_seconds),
        estimate_usd=None if hourly is None else paid_seconds / 3600 * hourly / per_node,
        hourly_usd=hourly,
        **measured,
    )
