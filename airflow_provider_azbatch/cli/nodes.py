"""``airflow azbatch pools nodes POOL`` and ``airflow azbatch pools upload-logs POOL [NODE ...]``: a pool's nodes
with their state and errors, and their Batch service logs kept in the connection's storage account (see
:mod:`airflow_provider_azbatch.runs.forensics`)."""

from __future__ import annotations

from argparse import Namespace
from typing import TYPE_CHECKING, Any

from airflow.utils.cli import suppress_logs_and_warning
from airflow.utils.providers_configuration_loader import providers_configuration_loaded

from airflow_provider_azbatch.cli.command import CliError, note, run
from airflow_provider_azbatch.cli.node_table import NODE_DETAIL_COLUMNS, node_details
from airflow_provider_azbatch.cli.output import Column, print_records, print_structured
from airflow_provider_azbatch.cli.times import parse_time
from airflow_provider_azbatch.enums import enum_value

if TYPE_CHECKING:
    from airflow_provider_azbatch.hooks.batch import AzureBatchHook

NODES_SELECT = [
    "id",
    "state",
    "schedulingState",
    "isDedicated",
    "ipAddress",
    "allocationTime",
    "lastBootTime",
    "runningTasksCount",
    "runningTaskSlotsCount",
    "startTaskInfo",
    "errors",
]
# Nodes worth a look: their logs are what `upload-logs` without NODE keeps.
FAILED_STATES = ("starttaskfailed", "unusable", "unknown", "offline")
KEPT_COLUMNS = (
    Column("node_id", "node"),
    Column("files", "files"),
    Column("url", "where"),
    Column("problem", "not kept because"),
)


# -- pools nodes -----------------------------------------------------------------------------------------
@suppress_logs_and_warning
@providers_configuration_loaded
def pools_nodes(args: Namespace) -> None:
    """List a pool's nodes: state, scheduling, address, start task and errors."""
    run(args, _nodes)


def _pool_nodes(hook: AzureBatchHook, pool_id: str) -> list[Any]:
    if hook.get_pool(pool_id, select=["id"]) is None:
        raise CliError(f"Pool '{pool_id}' does not exist in Batch account '{hook.account_name}'")
    return hook.list_nodes(pool_id, select=NODES_SELECT)


def _nodes(hook: AzureBatchHook, args: Namespace) -> None:
    nodes = [node_details(node) for node in _pool_nodes(hook, args.pool_id)]
    print_records(nodes, NODE_DETAIL_COLUMNS, args.output)
    failed = [node["id"] for node in nodes if node["state"] in FAILED_STATES]
    if failed and args.output not in ("json", "yaml"):
        note(
            f"{len(failed)} node(s) failed: `airflow azbatch pools upload-logs {args.pool_id}` keeps their Batch "
            "service logs in the connection's storage account before they go"
        )


# -- pools upload-logs -----------------------------------------------------------------------------------
@suppress_logs_and_warning
@providers_configuration_loaded
def pools_upload_logs(args: Namespace) -> None:
    """Have Batch upload nodes' service logs to the connection's storage account, and say where they are."""
    run(args, _upload_logs)


def _upload_logs(hook: AzureBatchHook, args: Namespace) -> None:
    from airflow_provider_azbatch import config
    from airflow_provider_azbatch.runs.forensics import MAX_NODES, keep_node_logs

    if not config.get_str("node_logs_container").strip():
        raise CliError("[azbatch] node_logs_container is empty: name the container to upload node logs to")
    nodes = {node.id: node for node in _pool_nodes(hook, args.pool_id)}
    wanted = list(args.node_ids or [])
    if not wanted:
        wanted = [node_id for node_id, node in nodes.items() if enum_value(node.state) in FAILED_STATES]
        if not wanted:
            raise CliError(
                f"No node of pool {args.pool_id} is in a failed state ({', '.join(FAILED_STATES)}): name the nodes"
            )
        wanted = wanted[:MAX_NODES]
    unknown = [node_id for node_id in wanted if node_id not in nodes]
    if unknown:
        raise CliError(
            f"Pool {args.pool_id} has no node {', '.join(unknown)} (`airflow azbatch pools nodes` lists them)"
        )
    since = parse_time(args.since, "--since") if args.since else None
    kept = []
    for start in range(0, len(wanted), MAX_NODES):
        kept += keep_node_logs(hook, args.pool_id, wanted[start : start + MAX_NODES], _Quiet(), since=since)
    records = [item.to_json() for item in kept]
    if args.output in ("json", "yaml"):
        print_structured(records, args.output)
    else:
        print_records(records, KEPT_COLUMNS, args.output)
    if any(item.problem for item in kept):
        raise CliError("The logs of some nodes were not kept (see above)")


class _Quiet:
    """A log for keep_node_logs whose progress lines go to stderr as notes."""

    def info(self, message: str, *args: Any) -> None:
        note(message % args)

    debug = warning = error = exception = info  # a compat.Log
