"""The table of a finished job's tasks that closes the operator's log, as a collapsible Airflow log group."""

from __future__ import annotations

from collections import Counter

from airflow_provider_azbatch.model.outcomes import JobOutcomes, TaskOutcome

# A job with more tasks than this gets counts (and its unsuccessful tasks) instead of a row per task.
MAX_SUMMARY_ROWS = 50
MAX_NODE_CHARS = 24


def _node(node_id: str | None) -> str:
    if not node_id:
        return "-"
    if len(node_id) <= MAX_NODE_CHARS:
        return node_id
    keep = (MAX_NODE_CHARS - 1) // 2
    return f"{node_id[:keep]}…{node_id[-keep:]}"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {rest:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def _state(outcome: TaskOutcome) -> str:
    return outcome.outcome


def _table(outcomes: list[TaskOutcome]) -> list[str]:
    rows = [("task", "state", "exit", "node", "duration")]
    for outcome in outcomes:
        exit_code = "-" if outcome.exit_code is None else str(outcome.exit_code)
        rows.append(
            (outcome.id, _state(outcome), exit_code, _node(outcome.node_id), _duration(outcome.duration_seconds))
        )
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]


def summary_lines(job_id: str, outcomes: JobOutcomes) -> list[str]:
    """``::group::`` title, a table (or counts for big jobs), ``::endgroup::``: one log line each."""
    states = Counter(_state(outcome) for outcome in outcomes.listed)
    if outcomes.total > len(outcomes.listed):
        # Counts beyond the listed tasks: what is unsuccessful is listed in full.
        unsuccessful = Counter(_state(outcome) for outcome in outcomes.unsuccessful)
        states = Counter({"succeeded": outcomes.total - len(outcomes.unsuccessful), **unsuccessful})
    counted = ", ".join(f"{count} {state}" for state, count in sorted(states.items()))
    lines = [f"::group::Batch job {job_id}: {outcomes.total} task(s), {counted}"]
    if outcomes.total <= MAX_SUMMARY_ROWS:
        lines += _table(outcomes.listed)
    else:
        lines.append(f"{outcomes.total} tasks: one row per task only up to {MAX_SUMMARY_ROWS}; unsuccessful ones:")
        lines += _table(outcomes.unsuccessful[:MAX_SUMMARY_ROWS]) if outcomes.unsuccessful else ["(none)"]
    lines.append("::endgroup::")
    return lines
