"""What Spot preemptions cost a run: attempts lost to them (and to other requeues), per task, and the fallback to
dedicated nodes if there was one. No I/O.

A lost attempt is charged like the job's tasks (see :mod:`.cost`): on a pool made for the job, its node time;
on a shared pool, its time at the node's price per task slot. Prices are list prices, so the figure is an upper
bound for Spot nodes (they cost less).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_azbatch.watching.preemption import Requeue


@dataclass
class PreemptionReport:
    requeues: list[Requeue]
    # Node-seconds a lost attempt is charged per second it ran (1 on a pool made for the job, 1 / slots shared).
    node_share: float = 1.0
    hourly_usd: float | None = None
    fell_back: dict[str, Any] | None = None
    per_task: dict[str, dict[str, Any]] = field(init=False)

    def __post_init__(self) -> None:
        per_task: dict[str, dict[str, Any]] = defaultdict(
            lambda: {"preempted": 0, "requeued": 0, "lost_node_seconds": 0.0}
        )
        for requeue in self.requeues:
            entry = per_task[requeue.task]
            entry["requeued"] += 1
            entry["preempted"] += int(requeue.preempted)
            entry["lost_node_seconds"] += self._node_seconds(requeue)
        self.per_task = dict(per_task)

    def _node_seconds(self, requeue: Requeue) -> float:
        return requeue.seconds * requeue.nodes * self.node_share

    @property
    def preempted(self) -> int:
        return sum(1 for requeue in self.requeues if requeue.preempted)

    @property
    def lost_node_seconds(self) -> float:
        return sum(map(self._node_seconds, self.requeues))

    @property
    def lost_usd(self) -> float | None:
        return None if self.hourly_usd is None else self.lost_node_seconds / 3600 * self.hourly_usd

    def to_json(self) -> dict[str, Any]:
        return {
            "preempted": self.preempted,
            "requeued": len(self.requeues),
            "lost_node_seconds": round(self.lost_node_seconds, 1),
            "lost_usd": None if self.lost_usd is None else round(self.lost_usd, 6),
            "tasks": {
                task: {**entry, "lost_node_seconds": round(entry["lost_node_seconds"], 1)}
                for task, entry in sorted(self.per_task.items())
            },
            "fell_back": dict(self.fell_back) if self.fell_back else None,
        }

    def lines(self, job_id: str) -> list[str]:
        if not self.requeues and not self.fell_back:
            return [f"Spot: no task of Batch job {job_id} was preempted or requeued"]
        named = ", ".join(
            f"{task}: {entry['preempted']} preempted, {entry['requeued']} requeued"
            for task, entry in sorted(self.per_task.items())
        )
        other = len(self.requeues) - self.preempted
        shown = self.to_json()  # the XCom's rounded values, so that the log agrees with it to the last digit
        price = (
            f", about ${shown['lost_usd']:.4f} at list prices (an upper bound: Spot nodes cost less)"
            if shown["lost_usd"] is not None
            else ""
        )
        lines = [
            f"Spot: Batch job {job_id} lost {self.preempted} task attempt(s) to preemptions"
            + (f" and {other} to other requeues" if other else "")
            + (f" ({named})" if named else "")
            + f"; the lost attempts ran {shown['lost_node_seconds'] / 3600:.3f} node-h{price}"
        ]
        if self.fell_back:
            lines.append(
                f"Spot: fell back to dedicated nodes at {self.fell_back['at']} ({self.fell_back['reason']}): pool "
                f"{self.fell_back['from_pool']} -> {self.fell_back['to_pool']}"
            )
        return lines
