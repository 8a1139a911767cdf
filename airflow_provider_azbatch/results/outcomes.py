"""How each Batch task of a finished job ended, as the XCom result and the failure report use it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from airflow_provider_azbatch.enums import enum_value

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

    @classmethod
    def from_sdk(cls, task: Any) -> TaskOutcome:
        info = task.execution_info
        failure = getattr(info, "failure_info", None) if info is not None else None
        start = getattr(info, "start_time", None) if info is not None else None
        end = getattr(info, "end_time", None) if info is not None else None
        node = getattr(task, "node_info", None)
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
        )

    @property
    def succeeded(self) -> bool:
        return self.state == "completed" and self.result == "success"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
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
    """The first ``MAX_TASK_RESULTS`` outcomes by id, every unsuccessful one, and how many tasks there are."""

    listed: list[TaskOutcome]
    unsuccessful: list[TaskOutcome]
    total: int

    @classmethod
    def collect(cls, outcomes: Any) -> JobOutcomes:
        listed: list[TaskOutcome] = []
        unsuccessful: list[TaskOutcome] = []
        total = 0
        for outcome in outcomes:
            total += 1
            if len(listed) < MAX_TASK_RESULTS:
                listed.append(outcome)
            if not outcome.succeeded:
                unsuccessful.append(outcome)
        return cls(listed, unsuccessful, total)

    @property
    def failed(self) -> list[TaskOutcome]:
        return [outcome for outcome in self.unsuccessful if outcome.state == "completed"]

    @property
    def unfinished(self) -> list[TaskOutcome]:
        return [outcome for outcome in self.unsuccessful if outcome.state != "completed"]
