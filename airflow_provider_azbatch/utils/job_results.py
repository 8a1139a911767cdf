"""What a finished job produced: per-task results for XCom, and a failure message that helps."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from airflow_provider_azbatch.utils.job_watch import enum_value
from airflow_provider_azbatch.utils.log_tail import STDERR, last_lines

# XCom stays small for very large jobs: per-task results are listed up to this many tasks.
MAX_TASK_RESULTS = 1000
# Failed tasks quoted (with their stderr) in the error message.
MAX_FAILURES_QUOTED = 5


@dataclass
class TaskOutcome:
    id: str
    state: str
    exit_code: int | None
    result: str | None
    retry_count: int
    failure_code: str | None = None
    failure_message: str | None = None

    @classmethod
    def from_sdk(cls, task: Any) -> TaskOutcome:
        info = task.execution_info
        failure = getattr(info, "failure_info", None) if info is not None else None
        return cls(
            id=task.id,
            state=enum_value(task.state),
            exit_code=getattr(info, "exit_code", None),
            result=enum_value(info.result) if info is not None and info.result is not None else None,
            retry_count=getattr(info, "retry_count", 0) or 0,
            failure_code=getattr(failure, "code", None),
            failure_message=getattr(failure, "message", None),
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


_SELECT = ["id", "state", "executionInfo"]


def collect_outcomes(client: Any, job_id: str) -> tuple[list[TaskOutcome], list[TaskOutcome], int]:
    """(first MAX_TASK_RESULTS outcomes by id, every unsuccessful one, total number of tasks)."""
    listed: list[TaskOutcome] = []
    unsuccessful: list[TaskOutcome] = []
    total = 0
    for task in client.list_tasks(job_id, select=_SELECT):
        outcome = TaskOutcome.from_sdk(task)
        total += 1
        if len(listed) < MAX_TASK_RESULTS:
            listed.append(outcome)
        if not outcome.succeeded:
            unsuccessful.append(outcome)
    return listed, unsuccessful, total


def failure_report(
    client: Any,
    job_id: str,
    unsuccessful: list[TaskOutcome],
    total: int,
    *,
    tail_lines: int,
    terminate_reason: str | None,
    fallback: Any = None,
) -> str:
    failed = [o for o in unsuccessful if o.state == "completed"]
    never_ran = [o for o in unsuccessful if o.state != "completed"]
    parts = [f"Azure Batch job '{job_id}' failed: {len(failed)} of {total} tasks failed"]
    if never_ran:
        parts[0] += f", {len(never_ran)} did not finish"
    if terminate_reason == "MaxWallClockTimeExpiry":
        parts[0] += " (the job hit its maximum wall clock time and was terminated)"
    elif terminate_reason and terminate_reason not in ("AllTasksComplete",):
        parts[0] += f" (the job was terminated: {terminate_reason})"
    parts[0] += "."
    for outcome in failed[:MAX_FAILURES_QUOTED]:
        detail = f"Task '{outcome.id}' failed"
        if outcome.exit_code is not None:
            detail += f" with exit code {outcome.exit_code}"
        if outcome.failure_code:
            detail += f" ({outcome.failure_code}: {outcome.failure_message})"
        if outcome.retry_count:
            detail += f" after {outcome.retry_count} retries"
        stderr = last_lines(client, job_id, outcome.id, STDERR, tail_lines, fallback=fallback) if tail_lines else []
        if stderr:
            detail += f". Last {len(stderr)} lines of its stderr:\n" + "\n".join(f"    {line}" for line in stderr)
        else:
            detail += "."
        parts.append(detail)
    if len(failed) > MAX_FAILURES_QUOTED:
        more = ", ".join(o.id for o in failed[MAX_FAILURES_QUOTED : MAX_FAILURES_QUOTED + 20])
        parts.append(f"Also failed: {more}{' ...' if len(failed) > MAX_FAILURES_QUOTED + 20 else ''}")
    if never_ran:
        ids = ", ".join(f"{o.id} ({o.state})" for o in never_ran[:20])
        parts.append(f"Did not finish: {ids}{' ...' if len(never_ran) > 20 else ''}")
    return "\n".join(parts)
