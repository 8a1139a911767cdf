"""What a watch knows about its job, as JSON that travels in trigger kwargs, events and checkpoints.

Only host-independent values are kept here (no monotonic clock readings): a watch resumed on another
triggerer continues from it as it is.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any


@dataclass
class StreamCursor:
    """Where the output of one stream was shown up to: the byte offset after the last line logged."""

    offset: int = 0
    created: str | None = None
    done: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"offset": self.offset, "created": self.created, "done": self.done}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> StreamCursor:
        return cls(**data) if data else cls()


@dataclass
class WatchState:
    job_id: str
    expected_tasks: int | None = None
    streamed: list[str] = field(default_factory=list)
    cursors: dict[str, dict[str, Any]] = field(default_factory=dict)
    task_states: dict[str, str] = field(default_factory=dict)
    counts: dict[str, int] | None = None
    job_state: str | None = None
    terminate_reason: str | None = None
    pool_id: str | None = None
    pool_check_interval: float = 30.0
    # The last look at the pool found a problem one look cannot prove (see PoolProblem.certain).
    pool_suspect: bool = False
    # Where the tasks' logs are uploaded (container and prefix), read once a node is gone.
    log_location: dict[str, str] | None = None
    # A pool made for the job (deleted with it): its VM size, and its nodes as seen while the job ran
    # (node id -> {"dedicated", "allocated", "seen", "gone"}), for what the job cost.
    auto_pool_vm_size: str | None = None
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    # The job has a preparation task its tasks wait for (``waitForSuccess``): one that failed on every node
    # of the pool blocks them for good. The job has a release task: it is over once that ran (job completed).
    has_preparation: bool = False
    waits_for_preparation: bool = False
    has_release: bool = False
    # Nothing more can run (a :class:`~.blocking.Blocked` as JSON): the watch is over.
    blocked: dict[str, Any] | None = None
    # The job's pool may have Spot nodes: its tasks' attempts, requeues and preemptions, and the fallback to
    # dedicated nodes (see :mod:`.preemption`).
    spot: dict[str, Any] | None = None
    # What the pools the job used cost while idle, sampled as it ran (see :mod:`.idle_time`): pool id -> record.
    pool_idle: dict[str, dict[str, Any]] = field(default_factory=dict)
    # What informing reads could not read (see :mod:`.gaps`), said once in the task's log: key -> the line said.
    gaps: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "expected_tasks": self.expected_tasks,
            "streamed": list(self.streamed),
            "cursors": {key: dict(value) for key, value in self.cursors.items()},
            "task_states": dict(self.task_states),
            "counts": dict(self.counts) if self.counts is not None else None,
            "job_state": self.job_state,
            "terminate_reason": self.terminate_reason,
            "pool_id": self.pool_id,
            "pool_check_interval": self.pool_check_interval,
            "pool_suspect": self.pool_suspect,
            "log_location": self.log_location,
            "auto_pool_vm_size": self.auto_pool_vm_size,
            "nodes": {node: dict(record) for node, record in self.nodes.items()},
            "has_preparation": self.has_preparation,
            "waits_for_preparation": self.waits_for_preparation,
            "has_release": self.has_release,
            "blocked": self.blocked,
            "spot": copy.deepcopy(self.spot),
            "pool_idle": copy.deepcopy(self.pool_idle),
            "gaps": dict(self.gaps),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WatchState:
        # States written by earlier versions carried monotonic clock readings: they mean nothing here.
        known = {key: value for key, value in data.items() if key not in ("last_job_check", "last_pool_check")}
        return cls(**known)

    def shown_past(self, other: WatchState) -> bool:
        """Whether this state has shown every stream of the job at least as far as ``other``, and one further.

        A checkpoint for which this holds can replace ``other`` without showing a line twice or losing one.
        A stream whose file is not the same one in both (a task that started over) cannot be compared: False.
        """
        if self.job_id != other.job_id:
            return False
        further = False
        for key in self.cursors.keys() | other.cursors.keys():
            mine, theirs = StreamCursor.from_json(self.cursors.get(key)), StreamCursor.from_json(other.cursors.get(key))
            if mine.created is not None and theirs.created is not None and mine.created != theirs.created:
                return False
            if (mine.offset, mine.done) < (theirs.offset, theirs.done):
                return False
            further = further or (mine.offset, mine.done) > (theirs.offset, theirs.done)
        return further

    def cursor(self, task_id: str, stream: str) -> StreamCursor:
        return StreamCursor.from_json(self.cursors.get(f"{task_id}/{stream}"))

    def set_cursor(self, task_id: str, stream: str, cursor: StreamCursor) -> None:
        self.cursors[f"{task_id}/{stream}"] = cursor.to_json()
