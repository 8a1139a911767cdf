"""What a watch knows about its job, as JSON that travels in trigger kwargs, events and checkpoints.

Only host-independent values are kept here (no monotonic clock readings): a watch resumed on another
triggerer continues from it as it is.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

STDOUT, STDERR = "stdout.txt", "stderr.txt"
STREAMS = (STDOUT, STDERR)
TERMINAL_JOB_STATES = ("completed", "terminating", "deleting")


def epoch_seconds(iso: str | None) -> float | None:
    """An ISO 8601 time as the service gave it (with its offset), in epoch seconds; None if absent or unreadable."""
    try:
        return datetime.fromisoformat(iso).timestamp() if iso else None
    except ValueError:
        return None


@dataclass(frozen=True)
class TaskCounts:
    active: int = 0
    running: int = 0
    completed: int = 0
    succeeded: int = 0
    failed: int = 0

    @property
    def total(self) -> int:
        return self.active + self.running + self.completed

    def to_json(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, int]) -> TaskCounts:
        return cls(**data)


@dataclass(frozen=True)
class JobStatus:
    state: str
    terminate_reason: str | None = None
    pool_id: str | None = None


@dataclass(frozen=True)
class JobChange:
    """A job as the account view lists it: its state and when it entered it (service time, as sent), and the
    listing's entry as sent (``fields``: with what a listener asked for beyond these, e.g. ``metadata``)."""

    id: str
    state: str
    at: str
    fields: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class NodeTimes:
    """A node as the pool lists it: whether it is dedicated, when it was allocated, its state since when, and
    when its agent last booted (ISO 8601; None where the listing did not say); the tasks it runs, how many it ran,
    and the jobs of the tasks that recently ran on it (what the account view's pool pulse compares)."""

    id: str
    dedicated: bool
    allocated: str | None
    state: str | None = None
    state_since: str | None = None
    last_boot: str | None = None
    running_tasks: int | None = None
    tasks_run: int | None = None
    recent_jobs: tuple[str, ...] = ()


@dataclass(frozen=True)
class TaskAttempt:
    """A task's latest attempt as a listing shows it: its state, retries so far, and (once it started) the node
    it runs on and when it started (ISO 8601)."""

    state: str
    retry_count: int = 0
    node_id: str | None = None
    start: str | None = None


@dataclass(frozen=True)
class FileInfo:
    """A task file as a listing shows it: its size, and when it was created (a new file: the task restarted)."""

    size: int
    created: str | None = None


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


@dataclass(frozen=True)
class FileChunk:
    """Bytes of a file from a ranged read, and the file's creation time as the answer gives it (epoch seconds,
    whole: the ``ocp-creation-time`` header; None when absent)."""

    data: bytes
    created: int | None = None


@dataclass(frozen=True)
class FileEnd:
    """The last bytes of a file; ``whole``: they are the whole file (the first line is complete)."""

    data: bytes
    whole: bool

    def last_lines(self, count: int) -> list[str]:
        from airflow_provider_azbatch.watching.lines import last_lines

        return last_lines(self.data, count, trimmed=not self.whole)
