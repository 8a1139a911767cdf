"""Knowing when nothing more can run: tasks that wait on failed tasks, and a job preparation task that failed
everywhere. No I/O.

Batch keeps a task whose dependency failed ``active`` for good (the default ``dependencyAction`` of a failure
is ``block``, and "Batch does not yet support cancellation of dependent tasks"), and never runs a job's tasks
on a node whose job preparation task failed. Either way the job never completes by itself, so the watch
recognises it from what the service reports:

- dependencies: once no task runs and some have failed, the active tasks (with their dependencies) and the
  failed tasks (with their exit conditions) are listed, two requests of one page per 1,000 tasks, made again
  only when the task counts move; an active task is blocked when it depends on a failed task whose exit
  options block dependents, or on a blocked task;
- preparation: while tasks wait and none runs, at each look at the pool, the job's preparation task status
  (one request per 1,000 nodes): a job whose preparation task failed on every node of its pool cannot run.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from airflow_provider_azbatch.model.records import ActiveTask, FailedTask, SideTaskRun

# Blocked tasks named in the state (and so in messages); the rest are counted.
NAMED_TASKS = 10


@dataclass
class Blocked:
    """What keeps the rest of the job from ever running (as JSON in the watch state)."""

    reason: str  # "dependencies" or "preparation"
    tasks: list[str] = field(default_factory=list)
    count: int = 0
    # dependencies: the failed tasks others wait on (their ids); preparation: the nodes where it failed.
    failed: list[str] = field(default_factory=list)
    nodes: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Blocked:
        return cls(**data)

    def named(self) -> str:
        """``b, c`` or ``t-00, ..., t-09 and 40 more``."""
        text = ", ".join(self.tasks)
        more = self.count - len(self.tasks)
        return f"{text} and {more} more" if more > 0 else text


def _as_number(task_id: str) -> int | None:
    return int(task_id) if task_id.isdigit() else None


def blocked_by_dependencies(active: Sequence[ActiveTask], failed: Iterable[FailedTask]) -> tuple[list[str], list[str]]:
    """(the active tasks that can never run, the failed tasks they wait on, directly or through others).

    Ids compare without case, as the service compares them. A dependency on a task that is neither active nor
    failed (it succeeded, runs, or failed without blocking) holds nothing up.
    """
    roots = {task.id.lower(): task.id for task in failed if task.blocks_dependents}
    by_id = {task.id.lower(): task for task in active}
    dependents: dict[str, list[ActiveTask]] = {}
    ranged: list[ActiveTask] = []
    for task in active:
        for dep in task.depends_on:
            dependents.setdefault(dep.lower(), []).append(task)
        if task.depends_on_ranges:
            ranged.append(task)
    blocked: dict[str, ActiveTask] = {}
    waited_on: set[str] = set()
    frontier = list(roots)
    while frontier:
        key = frontier.pop()
        number = _as_number(key)
        waiting = list(dependents.get(key, ()))
        if number is not None:
            waiting += [t for t in ranged if any(start <= number <= end for start, end in t.depends_on_ranges)]
        for task in waiting:
            if key in roots:
                waited_on.add(roots[key])
            lowered = task.id.lower()
            if lowered not in blocked and lowered in by_id:
                blocked[lowered] = task
                frontier.append(lowered)
    ordered = [task.id for task in active if task.id.lower() in blocked]
    return ordered, sorted(waited_on)


def blocked_state(reason: str, tasks: Sequence[str], count: int, **extra: Any) -> Blocked:
    return Blocked(reason=reason, tasks=list(tasks[:NAMED_TASKS]), count=count, **extra)


def preparation_blocks_all(runs: Sequence[SideTaskRun], current_nodes: int) -> list[SideTaskRun]:
    """The failed preparation runs, when they cover every node the pool has now (else nothing: a node may
    still run the job's tasks, or has not tried yet)."""
    failed = [run for run in runs if run.kind == "preparation" and run.failed]
    nodes = {run.node_id for run in failed}
    if current_nodes <= 0 or len(nodes) < current_nodes:
        return []
    return failed
