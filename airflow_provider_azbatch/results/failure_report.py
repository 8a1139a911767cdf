"""The error message of a failed job: which tasks failed, how, and the end of their stderr. No I/O."""

from __future__ import annotations

from typing import Any

from airflow_provider_azbatch.results.outcomes import JobOutcomes
from airflow_provider_azbatch.watching.calls import Call, Step
from airflow_provider_azbatch.watching.state import STDERR, FileEnd

# Failed tasks quoted (with their stderr) in the error message.
MAX_FAILURES_QUOTED = 5
# How much of the end of a stderr file is read to find its last lines.
STDERR_TAIL_BYTES = 256 * 1024


def failure_report(
    job_id: str,
    outcomes: JobOutcomes,
    *,
    tail_lines: int,
    terminate_reason: str | None,
    log_location: dict[str, str] | None = None,
) -> Step[str]:
    failed, never_ran = outcomes.failed, outcomes.unfinished
    quoted = failed[:MAX_FAILURES_QUOTED]
    tails = (yield from _stderr_tails(job_id, [o.id for o in quoted], log_location)) if tail_lines else {}
    headline = f"Azure Batch job '{job_id}' failed: {len(failed)} of {outcomes.total} tasks failed"
    if never_ran:
        headline += f", {len(never_ran)} did not finish"
    if terminate_reason == "MaxWallClockTimeExpiry":
        headline += " (the job hit its maximum wall clock time and was terminated)"
    elif terminate_reason and terminate_reason != "AllTasksComplete":
        headline += f" (the job was terminated: {terminate_reason})"
    parts = [headline + "."]
    for outcome in quoted:
        detail = f"Task '{outcome.id}' failed"
        if outcome.exit_code is not None:
            detail += f" with exit code {outcome.exit_code}"
        if outcome.failure_code:
            detail += f" ({outcome.failure_code}: {outcome.failure_message})"
        if outcome.retry_count:
            detail += f" after {outcome.retry_count} retries"
        stderr = tails.get(outcome.id, FileEnd(b"", True)).last_lines(tail_lines)
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


def _stderr_tails(job_id: str, task_ids: list[str], log_location: dict[str, str] | None) -> Step[dict[str, FileEnd]]:
    """The end of each task's stderr: from its node, else from what it uploaded to Blob."""
    ends = yield [Call("read_task_file_tail", (job_id, task, STDERR, STDERR_TAIL_BYTES)) for task in task_ids]
    pairs = list(zip(task_ids, ends, strict=True))
    found: dict[str, FileEnd] = {task: end for task, end in pairs if isinstance(end, FileEnd)}
    gone = [task for task, end in pairs if end is None]
    if gone and log_location:
        sizes = yield [Call("get_uploaded_log_size", (log_location, job_id, task, STDERR)) for task in gone]
        sized = [(task, size) for task, size in zip(gone, sizes, strict=True) if isinstance(size, int) and size > 0]
        reads: list[Any] = yield [
            Call("read_uploaded_log", (log_location, job_id, task, STDERR, max(0, size - STDERR_TAIL_BYTES), size - 1))
            for task, size in sized
        ]
        for (task, size), data in zip(sized, reads, strict=True):
            if isinstance(data, bytes):
                found[task] = FileEnd(data, whole=size <= STDERR_TAIL_BYTES)
    return found
