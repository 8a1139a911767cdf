"""What the hooks read from Batch, as plain values: task counts, a job's status, its nodes, task attempts and files.

No I/O and no Airflow: the hooks build these from the service's answers; the watch, the CLI, the results and the
triggers read them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any

from airflow_provider_azbatch.model.exit_options import applied_exit_options
from airflow_provider_azbatch.model.lines import last_lines
from airflow_provider_azbatch.model.verdict import ENDED_STATES

STDOUT, STDERR = "stdout.txt", "stderr.txt"


STREAMS = (STDOUT, STDERR)


# The watch and the trigger read the verdict's ended states under this name.
TERMINAL_JOB_STATES = ENDED_STATES


def epoch_seconds(iso: str | None) -> float | None:
    """An ISO 8601 time as the service gave it (with its offset), in epoch seconds; None if absent or unreadable."""
    try:
        return datetime.fromisoformat(iso).timestamp() if iso else None
    except ValueError:
        return None


# A Batch timestamp as sent: seconds, an optional fraction of any length, "Z" or an offset.
_WIRE_TIME = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)?")


def wire_time_iso(value: str) -> str:
    """A timestamp from a response body as the SDK's models give it (``datetime.isoformat()``): the
    fraction cut to microseconds, "Z" as "+00:00". A read that skips the models must record the same
    string, or a cursor saved by one hook would look like a different file to the other."""
    match = _WIRE_TIME.fullmatch(value)
    if match is None:
        from azure.batch.models import FileProperties

        created = FileProperties({"creationTime": value}).creation_time
        return created.isoformat() if created else value
    seconds, fraction, zone = match.groups()
    text = seconds + (f".{(fraction + '00000')[:6]}" if fraction else "") + ("+00:00" if zone == "Z" else zone or "")
    return datetime.fromisoformat(text).isoformat()


def service_time(value: str) -> datetime:
    """A listed time (``stateTransitionTime``) as a moment (a value that does not parse counts as long ago)."""
    try:
        moment = datetime.fromisoformat(wire_time_iso(value))
    except ValueError:
        return datetime.min.replace(tzinfo=timezone.utc)
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


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
    the jobs of the tasks that recently ran on it (what the account view's pool listings compare), and when those
    ran (start, end or None while running: what its idle time is counted from)."""

    id: str
    dedicated: bool
    allocated: str | None
    state: str | None = None
    state_since: str | None = None
    last_boot: str | None = None
    running_tasks: int | None = None
    tasks_run: int | None = None
    recent_jobs: tuple[str, ...] = ()
    task_spans: tuple[tuple[str, str | None], ...] = ()


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
        return last_lines(self.data, count, trimmed=not self.whole)


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
