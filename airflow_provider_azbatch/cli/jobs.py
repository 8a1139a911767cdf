"""``airflow azbatch jobs list|describe|cancel``."""

from __future__ import annotations

import itertools
from argparse import Namespace
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from airflow.utils.cli import suppress_logs_and_warning
from airflow.utils.providers_configuration_loader import providers_configuration_loaded

from airflow_provider_azbatch.cli.command import CliError, confirm, note, run
from airflow_provider_azbatch.cli.outcomes import OUTCOMES, job_outcome
from airflow_provider_azbatch.cli.output import (
    Column,
    cell,
    duration_cell,
    print_fields,
    print_heading,
    print_records,
    print_structured,
)
from airflow_provider_azbatch.cli.targets import job_id_of, metadata_of
from airflow_provider_azbatch.cli.times import iso_time, seconds_between, time_window
from airflow_provider_azbatch.enums import enum_value
from airflow_provider_azbatch.hooks.storage import LogLocation
from airflow_provider_azbatch.submission.job_ids import DAG_ID_KEY, MAP_INDEX_KEY, RUN_ID_KEY, TASK_ID_KEY

if TYPE_CHECKING:
    from azure.batch.models import BatchTask

    from airflow_provider_azbatch.hooks.batch import AzureBatchHook

LIST_SELECT = ["id", "state", "creationTime", "executionInfo", "metadata", "poolInfo"]
TASK_SELECT = ["id", "state", "executionInfo", "nodeInfo", "multiInstanceSettings"]


def _tasks_text(counts: dict[str, int] | None) -> str:
    """``3 succeeded, 1 failed, 2 waiting``: the tasks that have any."""
    if not counts:
        return ""
    parts = [(counts["succeeded"], "succeeded"), (counts["failed"], "failed"), (counts["running"], "running")]
    parts.append((counts["active"], "waiting"))
    return ", ".join(f"{number} {what}" for number, what in parts if number) or "none"


LIST_COLUMNS = (
    Column("id", "job"),
    Column("outcome", "outcome"),
    Column("tasks", "tasks", _tasks_text),
    Column("state", "state"),
    Column("created", "created"),
    Column("pool_id", "pool"),
    Column("dag_id", "dag"),
    Column("task_id", "task"),
    Column("run_id", "run"),
    Column("terminate_reason", "terminate reason"),
)


def _failure_text(failure: dict[str, Any] | None) -> str:
    return f"{failure['code']}: {failure['message']}" if failure else ""


TASK_COLUMNS = (
    Column("id", "task"),
    Column("state", "state"),
    Column("result", "result"),
    Column("exit_code", "exit code"),
    Column("node_id", "node"),
    Column("retry_count", "retries"),
    Column("start_time", "start"),
    Column("end_time", "end"),
    Column("duration_seconds", "duration", duration_cell),
    Column("failure", "failure", _failure_text),
)


# -- jobs list -----------------------------------------------------------------------------------------
@suppress_logs_and_warning
@providers_configuration_loaded
def jobs_list(args: Namespace) -> None:
    """List jobs, the newest first."""
    run(args, _list)


def _odata(text: str) -> str:
    return text.replace("'", "''")


def list_filter(
    states: list[str] | None, prefix: str | None, since: datetime | None, until: datetime | None
) -> str | None:
    """What the service can filter itself (jobs' metadata it cannot: that is matched here)."""
    parts = []
    if states:
        parts.append("(" + " or ".join(f"state eq '{state}'" for state in states) + ")")
    if prefix:
        parts.append(f"startswith(id, '{_odata(prefix)}')")
    if since is not None:
        parts.append(f"creationTime ge datetime'{iso_time(since)}'")
    if until is not None:
        parts.append(f"creationTime le datetime'{iso_time(until)}'")
    return " and ".join(parts) or None


def job_summary(job: Any) -> dict[str, Any]:
    metadata = metadata_of(job)
    info = job.execution_info
    pool_info = getattr(job, "pool_info", None)
    map_index = metadata.get(MAP_INDEX_KEY)
    return {
        "id": job.id,
        "state": enum_value(job.state),
        "created": job.creation_time,
        "pool_id": getattr(info, "pool_id", None) or getattr(pool_info, "pool_id", None),
        "dag_id": metadata.get(DAG_ID_KEY),
        "task_id": metadata.get(TASK_ID_KEY),
        "run_id": metadata.get(RUN_ID_KEY),
        "map_index": int(map_index) if map_index and map_index.lstrip("-").isdigit() else None,
        "terminate_reason": getattr(info, "termination_reason", None),
    }


def _with_outcome(hook: AzureBatchHook, job: dict[str, Any]) -> dict[str, Any] | None:
    """The job's summary with its task counts and outcome (None: it was deleted meanwhile)."""
    from azure.core.exceptions import ResourceNotFoundError

    try:
        counts = hook.get_task_counts(job["id"])
    except ResourceNotFoundError:
        return None
    outcome = job_outcome(job["state"], counts, job["terminate_reason"], job.pop("_scheduling_error"))
    return {**job, "outcome": outcome, "tasks": counts.to_json()}


def _listed(hook: AzureBatchHook, where: str | None, schedule_id: str | None) -> Iterable[Any]:
    """The jobs of the account, or those a job schedule made (the service's own list: Jobs_ListJobsFromSchedule)."""
    if schedule_id is None:
        return hook.list_jobs(filter=where, select=LIST_SELECT)
    from azure.core.exceptions import ResourceNotFoundError

    try:
        return list(hook.client.list_jobs_from_schedule(schedule_id, filter=where, select=LIST_SELECT))
    except ResourceNotFoundError:
        raise CliError(f"No job schedule {schedule_id!r} in this Batch account") from None


def _list(hook: AzureBatchHook, args: Namespace) -> None:
    since, until = time_window(args.since, args.until)
    wanted = {DAG_ID_KEY: args.dag_id, TASK_ID_KEY: args.task_id, RUN_ID_KEY: args.run_id}
    wanted = {key: value for key, value in wanted.items() if value}
    # --state takes outcomes too ("--state failed"): Batch's own states are filtered by the service.
    asked = [*(args.state or []), *(getattr(args, "outcome", None) or [])]
    states = [state for state in asked if state not in OUTCOMES]
    outcomes = [state for state in asked if state in OUTCOMES]
    jobs: list[dict[str, Any]] = []
    for job in _listed(hook, list_filter(states, args.prefix, since, until), getattr(args, "schedule", None)):
        metadata = metadata_of(job)
        if all(metadata.get(key) == value for key, value in wanted.items()):
            summary = job_summary(job)
            summary["_scheduling_error"] = getattr(job.execution_info, "scheduling_error", None) is not None
            jobs.append(summary)
    jobs.sort(key=lambda job: (job["created"], job["id"]), reverse=True)
    # The outcome costs a request per job: only as many as are shown (or looked at, to find them).
    shown: list[dict[str, Any]] = []
    looked_at = 0
    for listed in jobs:
        if len(shown) == args.limit:
            break
        looked_at += 1
        found = _with_outcome(hook, listed)
        if found is not None and (not outcomes or found["outcome"] in outcomes):
            shown.append(found)
    print_records(shown, LIST_COLUMNS, args.output)
    if len(shown) == args.limit and looked_at < len(jobs):
        if outcomes:
            note(f"Showing the newest {len(shown)} {' or '.join(outcomes)} jobs (--limit to see more)")
        else:
            note(f"Showing the newest {len(shown)} of {len(jobs)} jobs (--limit to see more)")
    elif not shown and outcomes:
        window = f" since {iso_time(since)}" if since is not None else ""
        note(f"No {' or '.join(outcomes)} jobs{window} among the {len(jobs)} listed")


# -- jobs describe -------------------------------------------------------------------------------------
@suppress_logs_and_warning
@providers_configuration_loaded
def jobs_describe(args: Namespace) -> None:
    """A job's state, task counts and tasks."""
    run(args, _describe)


def _failure(info: Any) -> dict[str, Any] | None:
    failure = getattr(info, "failure_info", None)
    if failure is None:
        return None
    return {"category": enum_value(failure.category), "code": failure.code, "message": failure.message}


def task_record(task: BatchTask) -> dict[str, Any]:
    info = task.execution_info
    start, end = getattr(info, "start_time", None), getattr(info, "end_time", None)
    result = getattr(info, "result", None)
    return {
        "id": task.id,
        "state": enum_value(task.state),
        "result": enum_value(result) if result is not None else None,
        "exit_code": getattr(info, "exit_code", None),
        "node_id": getattr(task.node_info, "node_id", None),
        "retry_count": getattr(info, "retry_count", None),
        "start_time": start,
        "end_time": end,
        "duration_seconds": seconds_between(start, end),
        "failure": _failure(info),
    }


def subtask_record(subtask: Any) -> dict[str, Any]:
    result = subtask.result
    return {
        "id": subtask.id,
        "state": enum_value(subtask.state) if subtask.state is not None else None,
        "result": enum_value(result) if result is not None else None,
        "exit_code": subtask.exit_code,
        "node_id": getattr(subtask.node_info, "node_id", None),
        "start_time": subtask.start_time,
        "end_time": subtask.end_time,
        "duration_seconds": seconds_between(subtask.start_time, subtask.end_time),
        "failure": _failure(subtask),
    }


def describe_job(hook: AzureBatchHook, job_id: str, limit: int | None = None) -> dict[str, Any]:
    job = hook.get_job(job_id)
    if job is None:
        raise CliError(f"Batch job '{job_id}' does not exist in Batch account '{hook.account_name}'")
    counts = hook.get_task_counts(job_id)
    tasks = []
    for task in itertools.islice(hook.list_tasks(job_id, select=TASK_SELECT), limit):
        record = task_record(task)
        if task.multi_instance_settings is not None:
            record["subtasks"] = [subtask_record(sub) for sub in hook.list_subtasks(job_id, task.id)]
        tasks.append(record)
    summary = job_summary(job)
    info = job.execution_info
    error = getattr(info, "scheduling_error", None)
    location = LogLocation.from_metadata(job.metadata)
    submitted_by = None
    if summary["dag_id"]:
        submitted_by = {key: summary[key] for key in ("dag_id", "task_id", "run_id", "map_index")}
    return {
        "id": job.id,
        "display_name": job.display_name,
        "state": summary["state"],
        "terminate_reason": summary["terminate_reason"],
        "pool_id": summary["pool_id"],
        "created": job.creation_time,
        "started": getattr(info, "start_time", None),
        "ended": getattr(info, "end_time", None),
        "scheduling_error": {"category": enum_value(error.category), "code": error.code, "message": error.message}
        if error is not None
        else None,
        "submitted_by": submitted_by,
        "logs_location": location.to_metadata() if location else None,
        "metadata": metadata_of(job),
        "task_counts": counts.to_json(),
        "tasks": tasks,
    }


def _describe(hook: AzureBatchHook, args: Namespace) -> None:
    document = describe_job(hook, job_id_of(hook, args, args.job_id), args.limit)
    counted = sum(document["task_counts"][state] for state in ("active", "running", "completed"))
    if counted > len(document["tasks"]) == args.limit:
        note(f"Showing the first {args.limit} of {counted} tasks by id (--limit to see more)")
    if args.output in ("json", "yaml"):
        print_structured(document, args.output)
        return
    counts = document["task_counts"]
    total = counts["active"] + counts["running"] + counts["completed"]
    submitted = document["submitted_by"]
    error = document["scheduling_error"]
    print_fields(
        [
            ("Job", document["id"]),
            ("Display name", document["display_name"] or ""),
            ("State", document["state"]),
            ("Terminate reason", document["terminate_reason"] or ""),
            ("Scheduling error", f"{error['code']}: {error['message']}" if error else ""),
            ("Pool", document["pool_id"] or ""),
            ("Created", cell(document["created"])),
            ("Started", cell(document["started"])),
            ("Ended", cell(document["ended"])),
            (
                "Submitted by",
                f"DAG {submitted['dag_id']}, task {submitted['task_id']}, run {submitted['run_id']}"
                + (f", map index {submitted['map_index']}" if submitted["map_index"] is not None else "")
                if submitted
                else "",
            ),
            ("Task logs in Blob", document["logs_location"] or ""),
            (
                "Tasks",
                f"{total}: {counts['active']} active, {counts['running']} running, {counts['succeeded']} succeeded, "
                f"{counts['failed']} failed",
            ),
        ]
    )
    rows = []
    for task in document["tasks"]:
        rows.append(task)
        for subtask in task.get("subtasks", []):
            rows.append({**subtask, "id": f"{task['id']}/{subtask['id']}"})
    print_heading("Tasks:" if rows else "Tasks: none")
    if rows:
        print_records(rows, TASK_COLUMNS, args.output)


# -- jobs cancel ---------------------------------------------------------------------------------------
@suppress_logs_and_warning
@providers_configuration_loaded
def jobs_cancel(args: Namespace) -> None:
    """Terminate a job (and delete it, with --delete)."""
    run(args, _cancel)


def _cancel(hook: AzureBatchHook, args: Namespace) -> None:
    job_id = job_id_of(hook, args, args.job_id)
    job = hook.get_job(job_id, select=["id", "state"])
    if job is None:
        raise CliError(f"Batch job '{job_id}' does not exist in Batch account '{hook.account_name}'")
    what = f"Terminate{' and delete' if args.delete else ''} Batch job {job_id} ({enum_value(job.state)})?"
    if not args.yes and not confirm(what):
        raise CliError("Not confirmed: nothing was done (--yes to skip the question)")
    if hook.terminate_job(job_id, reason=args.reason, wait=True):
        print(f"Batch job {job_id} terminated ({args.reason})")
    else:
        ended = hook.get_job(job_id, select=["id", "state"])
        state = enum_value(ended.state) if ended is not None else "deleted"
        print(f"Batch job {job_id} had already ended ({state}): not terminated")
    if args.delete:
        hook.delete_job(job_id, wait=True)
        print(f"Batch job {job_id} deleted")
