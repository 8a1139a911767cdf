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

from airflow_provider_azbatch.watching.exit_options import applied_exit_options

# Blocked tasks named in the state (and so in messages); the rest are counted.
NAMED_TASKS = 10


@dataclass(frozen=True)
class ActiveTask:
    """An active task and what it depends on (ids; ranges of integer ids, both ends included)."""

    id: str
    depends_on: tuple[str, ...] = ()
    depends_on_ranges: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class FailedTask:
    """A task that completed with a failure, and the exit conditions it was created with (REST shape)."""

    id: str
    exit_code: int | None = None
    failure_code: str | None = None
    exit_conditions: dict[str, Any] | None = None

    @property
    def blocks_dependents(self) -> bool:
        applied = applied_exit_options(
            self.exit_conditions, failed=True, exit_code=self.exit_code, failure_code=self.failure_code
        )
        return applied.dependency_action == "block"


@dataclass(frozen=True)
class SideTaskRun:
    """One run of a job preparation or release task on one node (``list_preparation_status``)."""

    kind: str  # "preparation" or "release"
    node_id: str
    state: str
    result: str | None = None
    exit_code: int | None = None
    failure_code: str | None = None
    failure_message: str | None = None
    retry_count: int = 0
    # The task's directory on the node (relative to the node's root), where its stdout/stderr are.
    task_root: str | None = None
    pool_id: str | None = None

    @property
    def failed(self) -> bool:
        return self.state == "completed" and self.result == "failure"

    def to_json(self) -> dict[str, Any]:
        return {
            "node_id": self.node_id,
            "exit_code": self.exit_code,
            "failure_code": self.failure_code,
            "failure_message": self.failure_message,
            "retry_count": self.retry_count,
            "task_root": self.task_root,
            "pool_id": self.pool_id,
        }


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
