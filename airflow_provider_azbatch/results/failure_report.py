"""The error message of a failed job: which tasks failed, how, and the end of their stderr. No I/O."""

from __future__ import annotations

from typing import Any

from airflow_provider_azbatch.model import reads as read
from airflow_provider_azbatch.model.outcomes import JobOutcomes, TaskOutcome
from airflow_provider_azbatch.model.records import STDERR, FileEnd
from airflow_provider_azbatch.model.verdict import ALL_TASKS_COMPLETE, MAX_WALL_CLOCK, TASK_FAILED
from airflow_provider_azbatch.watching.blocking import NAMED_TASKS, Blocked
from airflow_provider_azbatch.watching.calls import Step

# Failed tasks quoted (with their stderr) in the error message.
MAX_FAILURES_QUOTED = 5
# How much of the end of a stderr file is read to find its last lines.
STDERR_TAIL_BYTES = 256 * 1024


# How much of the end of a job preparation task's stderr is read.
TAIL_BYTES = 64 * 1024
# Task ids named in one line of the report.
NAMED_PER_LINE = 20


def _named(ids: list[str], limit: int = NAMED_PER_LINE) -> str:
    more = len(ids) - limit
    return ", ".join(ids[:limit]) + (f" and {more} more" if more > 0 else "")


def _cause(
    terminate_reason: str | None, blocked: Blocked | None, first_failure: str | None, fail_fast: bool
) -> str | None:
    """Why the job ended before its tasks did, in words (None: it did not)."""
    if blocked is not None and blocked.reason == "dependencies":
        return "the rest wait on failed tasks and can never run: the job was terminated"
    if blocked is not None:
        pool = next((node.get("pool_id") for node in blocked.nodes if node.get("pool_id")), None)
        where = f"every node of pool {pool}" if pool else "every node"
        return f"its job preparation task failed on {where}: the job was terminated"
    if terminate_reason == MAX_WALL_CLOCK:
        return "the job hit its maximum wall clock time and was terminated"
    if terminate_reason == TASK_FAILED:
        task = f"task '{first_failure}'" if first_failure else "a task"
        if fail_fast:
            return f"fail_fast: {task} failed and the job was terminated"
        return f"the exit conditions of {task} terminated the job"
    if terminate_reason and terminate_reason != ALL_TASKS_COMPLETE:
        return f"the job was terminated: {terminate_reason}"
    return None


def _task_detail(outcome: TaskOutcome, stderr: list[str]) -> str:
    detail = f"Task '{outcome.id}' failed"
    if outcome.exit_code is not None:
        detail += f" with exit code {outcome.exit_code}"
    if outcome.failure_code:
        detail += f" ({outcome.failure_code}: {outcome.failure_message})"
    if outcome.retry_count:
        detail += f" after {outcome.retry_count} retries"
    return detail + _quoted(stderr)


def _quoted(stderr: list[str]) -> str:
    if not stderr:
        return "."
    return f". Last {len(stderr)} lines of its stderr:\n" + "\n".join(f"    {line}" for line in stderr)


def failure_report(
    job_id: str,
    outcomes: JobOutcomes,
    *,
    tail_lines: int,
    terminate_reason: str | None,
    log_location: dict[str, str] | None = None,
    blocked: dict[str, Any] | None = None,
    fail_fast: bool = False,
) -> Step[str]:
    """The error of a job that did not succeed: its failed tasks (with the end of their stderr), the tasks
    ended with the job, those that can never run (``blocked``: the watch's :class:`~.blocking.Blocked`) and
    those that did not finish."""
    why_blocked = Blocked.from_json(blocked) if blocked else None
    # The first failure first: at a fail-fast end, it is the one that ended the job.
    failed = sorted(outcomes.failed, key=lambda outcome: (outcome.end_time or "", outcome.id))
    ended, never_ran = outcomes.ended, outcomes.unfinished
    quoted = failed[:MAX_FAILURES_QUOTED]
    tails = (yield from _stderr_tails(job_id, [o.id for o in quoted], log_location)) if tail_lines else {}
    headline = f"Azure Batch job '{job_id}' failed: {len(failed)} of {outcomes.total} tasks failed"
    if ended:
        headline += f", {len(ended)} ended with the job"
    if never_ran:
        headline += f", {len(never_ran)} did not finish"
    cause = _cause(terminate_reason, why_blocked, failed[0].id if failed else None, fail_fast)
    parts = [headline + (f" ({cause})." if cause else ".")]
    for outcome in quoted:
        parts.append(_task_detail(outcome, tails.get(outcome.id, FileEnd(b"", True)).last_lines(tail_lines)))
    if len(failed) > MAX_FAILURES_QUOTED:
        parts.append(f"Also failed: {_named([o.id for o in failed[MAX_FAILURES_QUOTED:]])}")
    if why_blocked is not None and why_blocked.reason == "preparation":
        parts += yield from side_task_failures(why_blocked.nodes, tail_lines)
    if ended:
        parts.append(f"Ended with the job: {_named([o.id for o in ended])}")
    blocked_ids = [o.id for o in never_ran if o.blocked]
    if blocked_ids:
        label = "Blocked by failed dependencies (they can never run)"
        if why_blocked is not None and why_blocked.reason == "preparation":
            label = "Blocked by the failed job preparation task"
        parts.append(f"{label}: {_named(blocked_ids, NAMED_TASKS)}")
    others = [o for o in never_ran if not o.blocked]
    if others:
        ids = ", ".join(f"{o.id} ({o.state})" for o in others[:NAMED_PER_LINE])
        parts.append(f"Did not finish: {ids}{' ...' if len(others) > NAMED_PER_LINE else ''}")
    return "\n".join(parts)


def side_task_failures(runs: list[dict[str, Any]], tail_lines: int, kind: str = "preparation") -> Step[list[str]]:
    """A line per node where the job's preparation (or release) task failed, with the end of its stderr
    (``runs``: :meth:`~.blocking.SideTaskRun.to_json` of each)."""
    runs = [run for run in runs if run.get("pool_id") and run.get("task_root")]
    calls = [
        read.read_node_file_tail(run["pool_id"], run["node_id"], f"{run['task_root']}/{STDERR}", TAIL_BYTES)
        for run in runs
    ]
    tails = (yield calls) if tail_lines and calls else [None] * len(runs)
    lines = []
    for run, tail in zip(runs, tails, strict=True):
        detail = f"The job {kind} task failed on node {run['node_id']}"
        if run.get("exit_code") is not None:
            detail += f" with exit code {run['exit_code']}"
        if run.get("failure_code"):
            detail += f" ({run['failure_code']}: {run.get('failure_message')})"
        if run.get("retry_count"):
            detail += f" after {run['retry_count']} retries"
        stderr = tail.last_lines(tail_lines) if isinstance(tail, FileEnd) else []
        lines.append(detail + _quoted(stderr))
    return lines


def _stderr_tails(job_id: str, task_ids: list[str], log_location: dict[str, str] | None) -> Step[dict[str, FileEnd]]:
    """The end of each task's stderr: from its node, else from what it uploaded to Blob."""
    ends = yield [read.read_task_file_tail(job_id, task, STDERR, STDERR_TAIL_BYTES) for task in task_ids]
    pairs = list(zip(task_ids, ends, strict=True))
    found: dict[str, FileEnd] = {task: end for task, end in pairs if isinstance(end, FileEnd)}
    gone = [task for task, end in pairs if end is None]
    if gone and log_location:
        sizes = yield [read.get_uploaded_log_size(log_location, job_id, task, STDERR) for task in gone]
        sized = [(task, size) for task, size in zip(gone, sizes, strict=True) if isinstance(size, int) and size > 0]
        reads: list[Any] = yield [
            read.read_uploaded_log(log_location, job_id, task, STDERR, max(0, size - STDERR_TAIL_BYTES), size - 1)
            for task, size in sized
        ]
        for (task, size), data in zip(sized, reads, strict=True):
            if isinstance(data, bytes):
                found[task] = FileEnd(data, whole=size <= STDERR_TAIL_BYTES)
    return found
