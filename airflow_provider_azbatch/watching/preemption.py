"""Spot nodes under a job: which of its tasks' attempts were lost to a preemption, and when to fall back to
dedicated nodes. No I/O.

Batch says nothing of preemptions in a task: a preempted Spot node's running tasks go back to ``active`` and
run again later, and the counters of a task do not count it (``retryCount`` counts failures retried,
``requeueCount`` requeues "as the result of a user request"). So the watch of a job whose pool may have Spot
nodes keeps, at each look at the job, the running tasks' attempts (node and start time, one listing); an
attempt that ends without the task completing or being retried was requeued, and it was a preemption when its
node is a Spot node that is ``preempted`` now, or booted again since the attempt started (a preempted node comes
back with its id: https://learn.microsoft.com/azure/batch/batch-spot-vms). A requeue whose task started over
between two looks is seen by its new start time.

The fallback (``SpotFallback`` on the pool) is due after that many preemptions, or once the job's tasks have
waited with none running for that long (no Spot node came), or when the pool reports an allocation error (a
Batch managed account gets no Spot node at all); the watch raises :class:`SpotFallbackDue` and the run moves the
job to dedicated nodes (:mod:`airflow_provider_azbatch.runs.spot_fallback`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Any

from airflow_provider_azbatch.model import reads as read
from airflow_provider_azbatch.model.records import NodeTimes, TaskAttempt
from airflow_provider_azbatch.watching.calls import Gap, Step, ask
from airflow_provider_azbatch.watching.state import WatchState


class SpotFallbackDue(Exception):
    """The job should move to dedicated nodes now; the message says why."""


@dataclass(frozen=True)
class Requeue:
    """One attempt of a task lost to a requeue: where and when it ran, and whether a preemption ended it."""

    task: str
    node: str | None
    start: str | None
    end: str
    preempted: bool
    nodes: int = 1

    @property
    def seconds(self) -> float:
        if self.start is None:
            return 0.0
        return max(0.0, (datetime.fromisoformat(self.end) - datetime.fromisoformat(self.start)).total_seconds())

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Requeue:
        return cls(**data)


def spot_watch(
    fallback: dict[str, Any] | None, task_nodes: dict[str, int] | None = None, pool_kind: str = "shared"
) -> dict[str, Any]:
    """The ``WatchState.spot`` of a new watch. ``fallback``: ``{"after_preemptions", "within_seconds"}`` (either
    None) or None; ``task_nodes``: the node count of the job's multi-node tasks."""
    return {
        "pool_kind": pool_kind,
        "fallback": fallback,
        "attempts": {},
        "requeues": [],
        "waiting_since": None,
        "fell_back": None,
        "task_nodes": dict(task_nodes or {}),
    }


def requeues(state: WatchState) -> list[Requeue]:
    return [Requeue.from_json(item) for item in (state.spot or {}).get("requeues", [])]


def preemptions(state: WatchState) -> int:
    return sum(1 for item in (state.spot or {}).get("requeues", []) if item["preempted"])


def _iso(now: float) -> str:
    return datetime.fromtimestamp(now, timezone.utc).isoformat()


def _later(when: str | None, than: str | None) -> bool:
    return when is not None and than is not None and datetime.fromisoformat(when) > datetime.fromisoformat(than)


def _describe(seconds: float) -> str:
    if seconds < 10:
        return f"{seconds:.1f} s"
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def track_attempts(state: WatchState, now: float, emit: Callable[[str | None, str], None]) -> Step[None]:
    """Look at the running tasks' attempts; record and say which earlier ones were requeued."""
    spot = state.spot
    assert spot is not None
    tracked: dict[str, dict[str, Any]] = spot["attempts"]
    counts = state.counts or {}
    if not tracked and not counts.get("running"):
        return
    (running,) = yield from ask(read.list_task_attempts(state.job_id, None))
    ended = [task for task, seen in tracked.items() if task not in running or running[task].start != seen["start"]]
    if ended:
        gone = tuple(task for task in ended if task not in running)
        now_states: dict[str, TaskAttempt] = dict(running)
        if gone:
            (listed,) = yield from ask(read.list_task_attempts(state.job_id, gone))
            now_states.update(listed)
        requeued = [
            task
            for task in ended
            if task in now_states
            and now_states[task].state != "completed"
            and now_states[task].retry_count <= tracked[task]["retry"]
        ]
        if requeued and state.pool_id is not None:
            (nodes,) = yield from ask(read.list_pool_nodes(state.pool_id))
            # Nodes that could not be read (a Gap, said by the node samples): the requeues without their nodes.
            by_id = {node.id: node for node in nodes or []} if not isinstance(nodes, Gap) else {}
            for task in requeued:
                _record(state, task, tracked[task], by_id.get(tracked[task]["node"]), now, emit)
    spot["attempts"] = {
        task: {"node": attempt.node_id, "start": attempt.start, "retry": attempt.retry_count}
        for task, attempt in running.items()
        if attempt.start is not None
    }


def _record(
    state: WatchState,
    task: str,
    seen: dict[str, Any],
    node: NodeTimes | None,
    now: float,
    emit: Callable[[str | None, str], None],
) -> None:
    spot = state.spot
    assert spot is not None
    preempted = (
        node is not None
        and not node.dedicated
        and (node.state == "preempted" or node.last_boot is None or _later(node.last_boot, seen["start"]))
    )
    # A node still preempted says when it was; otherwise the requeue was seen now.
    end = node.state_since if preempted and node is not None and node.state == "preempted" else None
    requeue = Requeue(
        task=task,
        node=seen["node"],
        start=seen["start"],
        end=end or _iso(now),
        preempted=preempted,
        nodes=int(spot.get("task_nodes", {}).get(task, 1)),
    )
    spot["requeues"].append(requeue.to_json())
    ran = _describe(requeue.seconds)
    if preempted:
        count = sum(1 for item in spot["requeues"] if item["preempted"] and item["task"] == task)
        emit(
            None,
            f"Batch task {task} was preempted: Azure took back its Spot node {seen['node']} after {ran} of running, "
            f"and Batch requeued the task (preemption {count} of this task, {preemptions(state)} of the job)",
        )
    else:
        why = "the node left the pool" if node is None else f"its node is {node.state or 'in an unknown state'}"
        emit(None, f"Batch task {task} was requeued by Batch after {ran} on node {seen['node']} ({why})")


def check_fallback(state: WatchState, now: float) -> None:
    """Raise :class:`SpotFallbackDue` when the pool's ``spot_fallback`` says the job should leave Spot nodes now;
    keep the time the job's tasks have been waiting with none running."""
    spot = state.spot
    if spot is None:
        return
    counts = state.counts or {}
    waiting = bool(counts.get("active")) and not counts.get("running")
    if not waiting:
        spot["waiting_since"] = None
    elif spot.get("waiting_since") is None:
        spot["waiting_since"] = now
    fallback = spot.get("fallback")
    if not fallback or spot.get("fell_back"):
        return
    after = fallback.get("after_preemptions")
    count = preemptions(state)
    if after is not None and count >= after:
        raise SpotFallbackDue(
            f"the job's tasks were preempted {count} time{'s' if count != 1 else ''} "
            f"(spot_fallback after_preemptions={after})"
        )
    within = fallback.get("within_seconds")
    since = spot.get("waiting_since")
    if within is not None and since is not None and now - since >= within:
        raise SpotFallbackDue(
            f"no Spot node ran the job's waiting tasks for {_describe(now - since)} "
            f"(spot_fallback no_spot_node_within={_describe(within)})"
        )


def fallback_available(state: WatchState) -> bool:
    spot = state.spot
    return bool(spot and spot.get("fallback") and not spot.get("fell_back"))
