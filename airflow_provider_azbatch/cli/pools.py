"""``airflow azbatch pools list|describe|delete``."""

from __future__ import annotations

import sys
from argparse import Namespace
from collections import Counter
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from airflow.utils.cli import suppress_logs_and_warning
from airflow.utils.providers_configuration_loader import providers_configuration_loaded

from airflow_provider_azbatch import config
from airflow_provider_azbatch.cli.command import CliError, confirm, note, run
from airflow_provider_azbatch.cli.idle_pools import idle_verdict
from airflow_provider_azbatch.cli.node_table import NODE_COLUMNS, error_record, errors_text, node_record
from airflow_provider_azbatch.cli.output import (
    Column,
    cell,
    print_fields,
    print_heading,
    print_records,
    print_structured,
)
from airflow_provider_azbatch.cli.times import format_duration
from airflow_provider_azbatch.enums import enum_value

if TYPE_CHECKING:
    from airflow_provider_azbatch.compute.catalog import VmCatalog
    from airflow_provider_azbatch.hooks.batch import AzureBatchHook

LIST_SELECT = [
    "id",
    "state",
    "allocationState",
    "vmSize",
    "currentDedicatedNodes",
    "targetDedicatedNodes",
    "currentLowPriorityNodes",
    "targetLowPriorityNodes",
    "enableAutoScale",
    "autoScaleEvaluationInterval",
    "resizeErrors",
    "taskSlotsPerNode",
]
NODE_SELECT = ["id", "state", "runningTasksCount", "runningTaskSlotsCount", "recentTasks", "startTaskInfo", "errors"]
# BatchNodeCounts attributes, in the order a pool's life goes through them, and their wire names.
NODE_COUNT_STATES = (
    ("creating", "creating"),
    ("starting", "starting"),
    ("waiting_for_start_task", "waitingforstarttask"),
    ("start_task_failed", "starttaskfailed"),
    ("idle", "idle"),
    ("running", "running"),
    ("rebooting", "rebooting"),
    ("reimaging", "reimaging"),
    ("upgrading_os", "upgradingos"),
    ("leaving_pool", "leavingpool"),
    ("preempted", "preempted"),
    ("offline", "offline"),
    ("unusable", "unusable"),
    ("deallocating", "deallocating"),
    ("deallocated", "deallocated"),
    ("unknown", "unknown"),
)


def _nodes_text(by_state: dict[str, int] | None) -> str:
    """``2 idle, 1 running``."""
    if not by_state:
        return ""
    return ", ".join(f"{count} {state}" for state, count in by_state.items())


def _hourly_text(usd: float | None) -> str:
    return f"${usd:.4f}" if usd is not None else ""


def _idle_for_text(seconds: float | None) -> str:
    return format_duration(seconds)


def _too_long_text(too_long: bool) -> str:
    return "yes" if too_long else ""


LIST_COLUMNS = (
    Column("id", "pool"),
    Column("idle", "idle"),
    Column("idle_seconds", "idle for", _idle_for_text),
    Column("idle_too_long", "idle too long", _too_long_text),
    Column("hourly_usd", "$/hour", _hourly_text),
    Column("state", "state"),
    Column("allocation_state", "allocation"),
    Column("vm_size", "vm size"),
    Column("dedicated_nodes", "dedicated", lambda v: f"{v['current']}/{v['target']}"),
    Column("low_priority_nodes", "spot", lambda v: f"{v['current']}/{v['target']}"),
    Column("auto_scale", "autoscale"),
    Column("nodes_by_state", "nodes", _nodes_text),
    Column("resize_errors", "resize errors", errors_text),
)
RUNNING_COLUMNS = (
    Column("job_id", "job"),
    Column("task_id", "task"),
    Column("node_id", "node"),
    Column("start_time", "started"),
)


def _node_counts(counts: Any) -> dict[str, int]:
    """A pool's nodes by state (dedicated and spot together), the states that have any."""
    by_state: dict[str, int] = {}
    for kind in (counts.dedicated, counts.low_priority) if counts is not None else ():
        if kind is None:
            continue
        for attribute, state in NODE_COUNT_STATES:
            number = getattr(kind, attribute, 0) or 0
            if number:
                by_state[state] = by_state.get(state, 0) + number
    return by_state


def pool_summary(pool: Any, counts: Any = None) -> dict[str, Any]:
    return {
        "id": pool.id,
        "state": enum_value(pool.state) if pool.state is not None else None,
        "allocation_state": enum_value(pool.allocation_state) if pool.allocation_state is not None else None,
        "vm_size": pool.vm_size,
        "task_slots_per_node": pool.task_slots_per_node,
        "dedicated_nodes": {"current": pool.current_dedicated_nodes or 0, "target": pool.target_dedicated_nodes or 0},
        "low_priority_nodes": {
            "current": pool.current_low_priority_nodes or 0,
            "target": pool.target_low_priority_nodes or 0,
        },
        "auto_scale": bool(pool.enable_auto_scale),
        "nodes_by_state": _node_counts(counts),
        "resize_errors": [error_record(error) for error in pool.resize_errors or []],
    }


# -- pools list ----------------------------------------------------------------------------------------
@suppress_logs_and_warning
@providers_configuration_loaded
def pools_list(args: Namespace) -> None:
    """List the account's pools."""
    run(args, _list)


def idle(summary: dict[str, Any]) -> str:
    """``yes`` when the pool has nodes and none runs a task (paid for nothing), ``no``, or ``no nodes``."""
    nodes = summary["dedicated_nodes"]["current"] + summary["low_priority_nodes"]["current"]
    if not nodes:
        return "no nodes"
    return "no" if summary["nodes_by_state"].get("running") else "yes"


def hourly_usd(summary: dict[str, Any], catalog: VmCatalog) -> float | None:
    """What the pool's nodes cost an hour now, at the catalog's list price (spot nodes too: an upper bound, as
    the run's cost estimate counts them); None for a size the catalog does not list."""
    size = catalog.find(summary["vm_size"] or "")
    if size is None:
        return None
    nodes: int = summary["dedicated_nodes"]["current"] + summary["low_priority_nodes"]["current"]
    return round(nodes * size.hourly_usd, 4)


def _list(hook: AzureBatchHook, args: Namespace) -> None:
    from airflow_provider_azbatch.compute import load_catalog

    catalog = load_catalog()
    counts = hook.list_pool_node_counts()
    margin = config.get_float("idle_node_margin")
    now = datetime.now(timezone.utc)
    pools = []
    for pool in hook.list_pools(select=LIST_SELECT):
        summary = pool_summary(pool, counts.get(pool.id))
        summary["idle"] = idle(summary)
        summary["hourly_usd"] = hourly_usd(summary, catalog)
        idle_nodes = hook.list_nodes_in_states(pool.id, ("idle",)) if summary["nodes_by_state"].get("idle") else []
        summary.update(idle_verdict(pool, (node.state_transition_time for node in idle_nodes), now, margin))
        pools.append(summary)
    print_records(pools, LIST_COLUMNS, args.output)
    too_long = [pool for pool in pools if pool["idle_too_long"]]
    if too_long and args.output not in ("json", "yaml"):
        note(
            f"{len(too_long)} pool(s) have nodes idle longer than their autoscale interval plus [azbatch] "
            f"idle_node_margin ({margin:g} s): a fixed pool, or a formula that does not give idle nodes back "
            f"({', '.join(pool['id'] for pool in too_long)})"
        )
    paid_idle = [pool for pool in pools if pool["idle"] == "yes"]
    if paid_idle and args.output not in ("json", "yaml"):
        total = sum(pool["hourly_usd"] or 0 for pool in paid_idle)
        note(
            f"{len(paid_idle)} pool(s) have nodes but run no task (${total:.4f}/hour at list prices, "
            f"{catalog.region}): `airflow azbatch pools delete POOL` removes one"
        )


# -- pools delete --------------------------------------------------------------------------------------
@suppress_logs_and_warning
@providers_configuration_loaded
def pools_delete(args: Namespace) -> None:
    """Delete a pool (asks first; --yes does not)."""
    run(args, _delete)


def _delete(hook: AzureBatchHook, args: Namespace) -> None:
    pool = hook.get_pool(args.pool_id, select=LIST_SELECT)
    if pool is None:
        raise CliError(f"Pool '{args.pool_id}' does not exist in Batch account '{hook.account_name}'")
    summary = pool_summary(pool, hook.list_pool_node_counts().get(pool.id))
    nodes = summary["dedicated_nodes"]["current"] + summary["low_priority_nodes"]["current"]
    running = summary["nodes_by_state"].get("running", 0)
    what = f"Delete Batch pool {pool.id} ({pool.vm_size}, {nodes} node(s)"
    what += f", {running} running tasks: they will be stopped)?" if running else ")?"
    if not args.yes:
        if not sys.stdin.isatty():
            raise CliError(f"Not deleted: confirm with --yes to delete Batch pool {pool.id} (no terminal to ask on)")
        if not confirm(what):
            raise CliError("Not confirmed: nothing was done (--yes to skip the question)")
    if hook.delete_pool(pool.id, wait=True):
        print(f"Batch pool {pool.id} deleted")
    else:
        print(f"Batch pool {pool.id} was already gone")


# -- pools describe ------------------------------------------------------------------------------------
@suppress_logs_and_warning
@providers_configuration_loaded
def pools_describe(args: Namespace) -> None:
    """A pool's size, nodes, autoscaling, errors and running tasks."""
    run(args, _describe)


def running_tasks(nodes: list[Any]) -> list[dict[str, Any]]:
    """The tasks the nodes run now (the primary of a multi-node task as its task, the others as task/n)."""
    found = []
    for node in nodes:
        for info in node.recent_tasks or []:
            if info.task_state is None or enum_value(info.task_state) != "running":
                continue
            task_id = info.task_id
            if info.subtask_id:
                task_id = f"{task_id}/{info.subtask_id}"
            found.append(
                {
                    "job_id": info.job_id,
                    "task_id": task_id,
                    "node_id": node.id,
                    "start_time": getattr(info.execution_info, "start_time", None),
                }
            )
    return sorted(found, key=lambda task: (task["job_id"] or "", task["task_id"] or ""))


def describe_pool(hook: AzureBatchHook, pool_id: str) -> dict[str, Any]:
    pool = hook.get_pool(pool_id)
    if pool is None:
        raise CliError(f"Pool '{pool_id}' does not exist in Batch account '{hook.account_name}'")
    nodes = hook.list_nodes(pool_id, select=NODE_SELECT)
    run_ = pool.auto_scale_run
    interval = pool.auto_scale_evaluation_interval
    document = pool_summary(pool)
    document["nodes_by_state"] = dict(Counter(enum_value(node.state) for node in nodes if node.state is not None))
    document.update(
        {
            "created": pool.creation_time,
            "allocation_state_since": pool.allocation_state_transition_time,
            "auto_scale": {
                "enabled": bool(pool.enable_auto_scale),
                "formula": pool.auto_scale_formula,
                "evaluation_interval_seconds": interval.total_seconds() if interval is not None else None,
                "last_evaluation": {
                    "timestamp": run_.timestamp,
                    "results": run_.results,
                    "error": error_record(run_.error) if run_.error is not None else None,
                }
                if run_ is not None
                else None,
            },
            "nodes": [node_record(node) for node in nodes],
            "running_tasks": running_tasks(nodes),
        }
    )
    return document


def _autoscale_fields(auto_scale: dict[str, Any]) -> list[tuple[str, str]]:
    if not auto_scale["enabled"]:
        return [("Autoscale", "off")]
    interval = auto_scale["evaluation_interval_seconds"]
    fields = [
        ("Autoscale", "on" + (f", evaluated every {format_duration(interval)}" if interval else "")),
        ("Formula", "\n".join(line.strip() for line in (auto_scale["formula"] or "").strip().split("\n"))),
    ]
    last = auto_scale["last_evaluation"]
    if last is not None:
        fields.append(("Last evaluation", cell(last["timestamp"])))
        if last["error"] is not None:
            details = "; ".join(f"{k}={v}" for k, v in last["error"]["details"].items())
            error = f"{last['error']['code']}: {last['error']['message']}" + (f" ({details})" if details else "")
            fields.append(("Evaluation error", error))
        else:
            fields.append(("Evaluation result", "\n".join((last["results"] or "").split(";"))))
    return fields


def _describe(hook: AzureBatchHook, args: Namespace) -> None:
    document = describe_pool(hook, args.pool_id)
    if args.output in ("json", "yaml"):
        print_structured(document, args.output)
        return
    dedicated, spot = document["dedicated_nodes"], document["low_priority_nodes"]
    allocation = document["allocation_state"] or ""
    if document["allocation_state_since"] is not None:
        allocation += f" since {cell(document['allocation_state_since'])}"
    slots = document["task_slots_per_node"]
    print_fields(
        [
            ("Pool", document["id"]),
            ("State", document["state"] or ""),
            ("Allocation", allocation),
            ("VM size", (document["vm_size"] or "") + (f", {slots} task slots per node" if slots else "")),
            ("Created", cell(document["created"])),
            ("Dedicated nodes", f"{dedicated['current']} (target {dedicated['target']})"),
            ("Spot nodes", f"{spot['current']} (target {spot['target']})"),
            ("Nodes", _nodes_text(document["nodes_by_state"]) or "none"),
            *_autoscale_fields(document["auto_scale"]),
            ("Resize errors", "\n".join(errors_text([error]) for error in document["resize_errors"])),
        ]
    )
    if document["nodes"]:
        print_heading("Nodes:")
        print_records(document["nodes"], NODE_COLUMNS, args.output)
    print_heading("Running tasks:" if document["running_tasks"] else "Running tasks: none")
    if document["running_tasks"]:
        print_records(document["running_tasks"], RUNNING_COLUMNS, args.output)
