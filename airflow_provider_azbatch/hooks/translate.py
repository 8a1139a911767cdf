"""SDK models to the provider's plain values, and the OData filters the hooks send."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow_provider_azbatch.enums import enum_value
from airflow_provider_azbatch.watching.state import FileInfo, JobStatus, NodeTimes, TaskCounts

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
OUTCOME_SELECT = ["id", "state", "executionInfo", "nodeInfo"]


def state_filter(states: Sequence[str]) -> str:
    return " or ".join(f"state eq '{state}'" for state in states)


def id_filter(ids: Sequence[str]) -> str:
    return " or ".join("id eq '{}'".format(task.replace("'", "''")) for task in ids)


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


NODE_TIMES_SELECT = ["id", "isDedicated", "allocationTime"]


def node_times_of(node: Any) -> NodeTimes:
    allocated = getattr(node, "allocation_time", None)
    return NodeTimes(node.id, bool(getattr(node, "is_dedicated", True)), allocated.isoformat() if allocated else None)
