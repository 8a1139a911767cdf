"""How each Batch task of a finished job ended, as the XCom result and the failure report use it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_provider_azbatch.enums import enum_value
from airflow_provider_azbatch.model.exit_options import applied_exit_options
from airflow_provider_azbatch.model.records import TaskCounts
from airflow_provider_azbatch.model.verdict import task_ended, task_outcome, task_succeeded

if TYPE_CHECKING:
    from azure.batch.models import BatchTask

# XCom stays small for very large jobs: per-task results are listed up to this many tasks.
MAX_TASK_RESULTS = 1000


@dataclass
class TaskOutcome:
    id: str
    state: str
    exit_code: int | None
    result: str | None
    retry_count: int
    failure_code: str | None = None
    failure_message: str | None = None
    node_id: str | None = None
    start_time: str | None = None
    end_time: str | None = None
    duration_seconds: float | None = None
    # The exit conditions the task was created with (REST shape): which failures it accepts.
    exit_conditions: dict[str, Any] | None = None
    # It can never run (the watch found it blocked, and the job was ended).
    blocked: bool = False

    @classmethod
    def from_sdk(cls, task: BatchTask) -> TaskOutcome:
        info = task.execution_info
        failure = getattr(info, "failure_info", None) if info is not None else None
        start = getattr(info, "start_time", None) if info is not None else None
        end = getattr(info, "end_time", None) if info is not None else None
        node = getattr(task, "node_info", None)
        conditions = getattr(task, "exit_conditions", None)
        return cls(
            id=task.id,
            state=enum_value(task.state),
            exit_code=getattr(info, "exit_code", None),
            result=enum_value(info.result) if info is not None and info.result is not None else None,
            retry_count=getattr(info, "retry_count", 0) or 0,
            failure_code=getattr(failure, "code", None),
            failure_message=getattr(failure, "message", None),
            node_id=getattr(node, "node_id", None),
            start_time=start.isoformat() if start is not None else None,
            end_time=end.isoformat() if end is not None else None,
            duration_seconds=(end - start).total_seconds() if start is not None and end is not None else None,
            exit_conditions=conditions.as_dict() if conditions is not None else None,
        )

    @property
    def succeeded(self) -> bool:
        return task_succeeded(self.state, self.result)

    @property
    def ended(self) -> bool:
        """Ended by a terminate request (its job's, or its own) rather than failing by itself."""
        return task_ended(self.state, self.result, self.failure_code)

    @property
    def accepted(self) -> bool:
        """It failed with an exit code its exit conditions map to ``dependencyAction: satisfy``: its dependents
        ran, and the run counts it as a success."""
        if self.state != "completed" or self.result != "failure" or self.ended:
            return False
        applied = applied_exit_options(
            self.exit_conditions, failed=True, exit_code=self.exit_code, failure_code=self.failure_code
        )
        return applied.by_exit_code and applied.dependency_action == "satisfy"

    @property
    def outcome(self) -> str:
        """``succeeded``, ``accepted``, ``failed``, ``ended``, ``blocked``, or the state of an unfinished task."""
        return task_outcome(self.state, self.result, self.failure_code, accepted=self.accepted, blocked=self.blocked)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "outcome": self.outcome,
            "state": self.state,
            "exit_code": self.exit_code,
            "result": self.result,
            "retry_count": self.retry_count,
        }
        if self.failure_code:
            out["failure"] = {"code": self.failure_code, "message": self.failure_message}
        return out


@dataclass
class JobOutcomes:
    """The first ``MAX_TASK_RESULTS`` outcomes by id, every unsuccessful one, and how many tasks there are.

    Unsuccessful: neither succeeded nor accepted (a failure whose exit code the task maps to ``satisfy``).
    """

    listed: list[TaskOutcome]
    unsuccessful: list[TaskOutcome]
    total: int

    @classmethod
    def collect(cls, outcomes: Any, *, blocked: bool = False) -> JobOutcomes:
        """``blocked``: the job's active tasks can never run (they wait on failures)."""
        listed: list[TaskOutcome] = []
        unsuccessful: list[TaskOutcome] = []
        total = 0
        for outcome in outcomes:
            total += 1
            if blocked and outcome.state == "active":
                outcome.blocked = True
            if len(listed) < MAX_TASK_RESULTS:
                listed.append(outcome)
            if not outcome.succeeded and not outcome.accepted:
                unsuccessful.append(outcome)
        return cls(listed, unsuccessful, total)

    @property
    def failed(self) -> list[TaskOutcome]:
        """Tasks that failed by themselves (not ended by a terminate request)."""
        return [outcome for outcome in self.unsuccessful if outcome.state == "completed" and not outcome.ended]

    @property
    def ended(self) -> list[TaskOutcome]:
        return [outcome for outcome in self.unsuccessful if outcome.ended]

    @property
    def unfinished(self) -> list[TaskOutcome]:
        return [outcome for outcome in self.unsuccessful if outcome.state != "completed"]

    @property
    def accepted(self) -> list[TaskOutcome]:
        return [outcome for outcome in self.listed if outcome.accepted]


# An event stays small for a job of thousands of tasks: exit codes of this many tasks at most (failed ones first).
MAX_EXIT_CODES = 100


# The task fields a watcher lists for a completed job.
TASK_END_SELECT = "id,state,executionInfo"


@dataclass(frozen=True)
class TaskEnd:
    """A task of a completed job, as List Tasks gives it: how it ended (None where it never ran)."""

    id: str
    state: str
    exit_code: int | None = None
    result: str | None = None

    @property
    def succeeded(self) -> bool:
        return task_succeeded(self.state, self.result)


def counts_of(tasks: Iterable[TaskEnd]) -> TaskCounts:
    """The task counts of a task listing, as Batch counts them (preparing is running; a task in a state not known
    here has not finished)."""
    active = running = completed = succeeded = 0
    for task in tasks:
        if task.state == "completed":
            completed += 1
            succeeded += task.succeeded
        elif task.state in ("preparing", "running"):
            running += 1
        else:
            active += 1
    return TaskCounts(active, running, completed, succeeded, completed - succeeded)


def task_end_of(entry: Mapping[str, Any]) -> TaskEnd:
    """One entry of List Tasks (plain JSON, ``TASK_END_SELECT``)."""
    info = entry.get("executionInfo") or {}
    code = info.get("exitCode")
    return TaskEnd(
        id=str(entry["id"]),
        state=str(entry.get("state") or ""),
        exit_code=int(code) if isinstance(code, int) else None,
        result=str(info["result"]) if info.get("result") else None,
    )
