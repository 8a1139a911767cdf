"""SDK models to the provider's plain values, and the OData filters the hooks send."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any

from airflow_provider_azbatch.enums import enum_value
from airflow_provider_azbatch.model.records import (
    ActiveTask,
    FailedTask,
    FileChunk,
    FileInfo,
    JobChange,
    JobStatus,
    NodeTimes,
    SideTaskRun,
    TaskAttempt,
    TaskCounts,
    wire_time_iso,
)

if TYPE_CHECKING:
    from azure.batch.models import BatchTask

POOL_SELECT = [
    "id",
    "state",
    "allocationState",
    "resizeErrors",
    "currentDedicatedNodes",
    "currentLowPriorityNodes",
    "targetDedicatedNodes",
    "targetLowPriorityNodes",
    "enableAutoScale",
    "autoScaleRun",
]
OUTCOME_SELECT = ["id", "state", "executionInfo", "nodeInfo", "exitConditions"]
ACTIVE_FILTER = "state eq 'active'"
ACTIVE_SELECT = ["id", "dependsOn"]
FAILED_FILTER = "state eq 'completed' and executionInfo/result eq 'failure'"
FAILED_SELECT = ["id", "executionInfo", "exitConditions"]
# What the account view lists of each job that changed.
JOB_CHANGE_SELECT = "id,state,stateTransitionTime"
# The status of a ranged read that starts past the file's end.
RANGE_NOT_SATISFIABLE = 416


def state_filter(states: Sequence[str]) -> str:
    return " or ".join(f"state eq '{state}'" for state in states)


def id_filter(ids: Sequence[str]) -> str:
    return " or ".join("id eq '{}'".format(task.replace("'", "''")) for task in ids)


def file_info_from_wire(entry: dict[str, Any]) -> FileInfo:
    """:func:`file_info` of one entry of a file listing's body (``value[i]``)."""
    props = entry.get("properties") or {}
    created = props.get("creationTime")
    return FileInfo(int(props.get("contentLength") or 0), wire_time_iso(created) if created else None)


def counts_from_wire(body: dict[str, Any]) -> TaskCounts:
    """:func:`counts_of` of a task counts response's body."""
    counts = body["taskCounts"]
    return TaskCounts(counts["active"], counts["running"], counts["completed"], counts["succeeded"], counts["failed"])


def file_info(node_file: Any) -> FileInfo:
    props = node_file.properties
    created = getattr(props, "creation_time", None)
    return FileInfo(int(getattr(props, "content_length", 0) or 0), created.isoformat() if created else None)


def counts_of(result: Any) -> TaskCounts:
    counts = result.task_counts
    return TaskCounts(counts.active, counts.running, counts.completed, counts.succeeded, counts.failed)


def job_status_of(job: Any) -> JobStatus:
    info = job.execution_info
    return JobStatus(enum_value(job.state), getattr(info, "termination_reason", None), getattr(info, "pool_id", None))


def tail_range(size: int, max_bytes: int) -> tuple[int, int] | None:
    """The byte range (inclusive) of the last ``max_bytes`` of a file of ``size`` bytes."""
    return (max(0, size - max_bytes), size - 1) if size > 0 else None


NODE_TIMES_SELECT = [
    "id",
    "isDedicated",
    "allocationTime",
    "state",
    "stateTransitionTime",
    "lastBootTime",
    "runningTasksCount",
    "totalTasksRun",
    "recentTasks",
]


def node_times_of(node: Any) -> NodeTimes:
    def iso(name: str) -> str | None:
        value = getattr(node, name, None)
        return value.isoformat() if value is not None else None

    state = getattr(node, "state", None)
    recent = getattr(node, "recent_tasks", None) or ()
    return NodeTimes(
        node.id,
        bool(getattr(node, "is_dedicated", True)),
        iso("allocation_time"),
        enum_value(state) if state is not None else None,
        iso("state_transition_time"),
        iso("last_boot_time"),
        getattr(node, "running_tasks_count", None),
        getattr(node, "total_tasks_run", None),
        tuple(dict.fromkeys(task.job_id for task in recent if task.job_id)),
        tuple(_task_span(task) for task in recent if task.execution_info and task.execution_info.start_time),
    )


def _task_span(task: Any) -> tuple[str, str | None]:
    end = task.execution_info.end_time
    return task.execution_info.start_time.isoformat(), end.isoformat() if end is not None else None


RUNNING_FILTER = "state eq 'running'"
# A Spot job's running tasks are listed at every look at the job (watching/preemption.py): at most this many.
MAX_ATTEMPTS_LISTED = 1000
ATTEMPT_SELECT = ["id", "state", "executionInfo", "nodeInfo"]


def task_attempt_of(task: BatchTask) -> TaskAttempt:
    info = getattr(task, "execution_info", None)
    node = getattr(task, "node_info", None)
    start = getattr(info, "start_time", None) if info is not None else None
    return TaskAttempt(
        enum_value(task.state),
        int(getattr(info, "retry_count", 0) or 0) if info is not None else 0,
        getattr(node, "node_id", None) if node is not None else None,
        start.isoformat() if start is not None else None,
    )


def active_task_of(task: BatchTask) -> ActiveTask:
    deps = getattr(task, "depends_on", None)
    ids = tuple(getattr(deps, "task_ids", None) or ()) if deps is not None else ()
    ranges = tuple((r.start, r.end) for r in (getattr(deps, "task_id_ranges", None) or ())) if deps is not None else ()
    return ActiveTask(task.id, ids, ranges)


def failed_task_of(task: BatchTask) -> FailedTask:
    info = task.execution_info
    failure = getattr(info, "failure_info", None)
    conditions = getattr(task, "exit_conditions", None)
    return FailedTask(
        task.id,
        getattr(info, "exit_code", None),
        getattr(failure, "code", None),
        conditions.as_dict() if conditions is not None else None,
    )


def side_task_runs_of(status: Any) -> list[SideTaskRun]:
    """A node's entry of the job preparation and release task status list, as one run of each that it has."""
    runs = []
    for kind, info in (
        ("preparation", status.job_preparation_task_execution_info),
        ("release", status.job_release_task_execution_info),
    ):
        if info is None:
            continue
        failure = getattr(info, "failure_info", None)
        runs.append(
            SideTaskRun(
                kind=kind,
                node_id=status.node_id,
                state=enum_value(info.state),
                result=enum_value(info.result) if getattr(info, "result", None) is not None else None,
                exit_code=getattr(info, "exit_code", None),
                failure_code=getattr(failure, "code", None),
                failure_message=getattr(failure, "message", None),
                retry_count=getattr(info, "retry_count", 0) or 0,
                task_root=getattr(info, "task_root_directory", None),
                pool_id=status.pool_id,
            )
        )
    return runs


def odata_time(moment: datetime) -> str:
    """A moment as an OData ``datetime'...'`` literal's text (UTC, milliseconds)."""
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def file_chunk_of(content: bytes, headers: Any) -> FileChunk:
    """A ranged read's answer: its bytes, and the file's creation time from ``ocp-creation-time``."""
    created = headers.get("ocp-creation-time")
    try:
        stamp = int(parsedate_to_datetime(created).timestamp()) if created else None
    except (TypeError, ValueError):
        stamp = None
    return FileChunk(content, stamp)


def service_date(header: str | None) -> datetime:
    """The service's clock from a response's ``Date`` header (RFC 7231; every Batch response carries one)."""
    if not header:
        raise ValueError("the Batch response has no Date header: the service's time is unknown")
    return parsedate_to_datetime(header).astimezone(timezone.utc)


def job_change_of(entry: dict[str, Any]) -> JobChange:
    """One entry of the account view's listing (plain JSON, ``JOB_CHANGE_SELECT`` and what else was selected)."""
    return JobChange(
        str(entry["id"]), str(entry.get("state") or ""), str(entry.get("stateTransitionTime") or ""), entry
    )
