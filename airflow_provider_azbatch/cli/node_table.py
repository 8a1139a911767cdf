"""A pool's nodes as the CLI shows them: one record and one table for ``pools describe`` (a few columns) and
``pools nodes`` (all of them)."""

from __future__ import annotations

from typing import Any

from airflow_provider_azbatch.cli.output import Column
from airflow_provider_azbatch.enums import enum_value


def error_record(error: Any) -> dict[str, Any]:
    """A Batch error (a node's, a resize's, a start task's) as plain values."""
    details = getattr(error, "error_values", None) or getattr(error, "error_details", None) or []
    return {
        "code": error.code,
        "message": error.message,
        "details": {item.name: item.value for item in details if getattr(item, "name", None)},
    }


def errors_text(errors: list[dict[str, Any]] | None) -> str:
    return "; ".join(f"{error['code']}: {error['message']}" for error in errors or [])


def _start_task(info: Any) -> str | None:
    if info is None:
        return None
    text = enum_value(info.state)
    if info.exit_code is not None:
        text += f", exit code {info.exit_code}"
    if info.failure_info is not None:
        text += f" ({info.failure_info.code}: {info.failure_info.message})"
    return text


def node_record(node: Any) -> dict[str, Any]:
    return {
        "id": node.id,
        "state": enum_value(node.state) if node.state is not None else None,
        "running_tasks": node.running_tasks_count,
        "running_task_slots": node.running_task_slots_count,
        "start_task": _start_task(node.start_task_info),
        "errors": [error_record(error) for error in node.errors or []],
    }


def node_details(node: Any) -> dict[str, Any]:
    """:func:`node_record` with the node's scheduling, kind, address and times (``pools nodes``)."""
    record = node_record(node)
    record.update(
        {
            "scheduling": enum_value(node.scheduling_state) if node.scheduling_state is not None else None,
            "kind": "dedicated" if node.is_dedicated else "spot",
            "ip_address": node.ip_address,
            "allocated": node.allocation_time,
            "last_boot": node.last_boot_time,
        }
    )
    return record


NODE_DETAIL_COLUMNS = (
    Column("id", "node"),
    Column("state", "state"),
    Column("scheduling", "scheduling"),
    Column("kind", "kind"),
    Column("ip_address", "ip"),
    Column("allocated", "allocated"),
    Column("running_tasks", "running"),
    Column("start_task", "start task"),
    Column("errors", "errors", errors_text),
)
# ``pools describe``: the node, its state, its tasks and what went wrong (with room to say "running tasks").
NODE_COLUMNS = tuple(
    Column(column.key, "running tasks") if column.key == "running_tasks" else column
    for column in NODE_DETAIL_COLUMNS
    if column.key in ("id", "state", "running_tasks", "start_task", "errors")
)
