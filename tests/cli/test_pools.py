"""``airflow azbatch pools list|describe|delete`` against the local Batch service."""

from __future__ import annotations

import io
import json
import re
from datetime import timedelta

import pytest
import yaml
from azure.batch import models as m

from airflow_provider_azbatch.compute import load_catalog
from local_azure_batch.testing import run_local_batch_service
from tests.airflow_helpers import azbatch_connection_json
from tests.cli.batch_jobs import create_job, iso, table, task, utc
from tests.helpers import pool_options, wait_until

FORMULA = "$TargetDedicatedNodes = min(2, $PendingTasks.GetSample(1));\n$NodeDeallocationOption = taskcompletion;"


@pytest.fixture(scope="module")
def busy_pool(batch_client):
    """One node with two slots, running one task."""
    batch_client.create_pool(pool_options("cli-pool", nodes=1, slots=2))
    create_job(batch_client, "cli-pool-job", "cli-pool", [task("sleeper", "sleep 60")], end_with_tasks=False)
    wait_until(lambda: batch_client.get_task("cli-pool-job", "sleeper").state == m.BatchTaskState.RUNNING)
    yield "cli-pool"
    from azure.batch.models._models import BatchJobTerminateOptions

    batch_client.begin_terminate_job("cli-pool-job", BatchJobTerminateOptions(termination_reason="TestEnded"))


@pytest.fixture(scope="module")
def autoscale_pools(batch_client):
    for pool_id, formula in (("cli-auto", FORMULA), ("cli-auto-broken", "$TargetDedicatedNodes = nosuchfunction(1);")):
        batch_client.create_pool(
            pool_options(
                pool_id,
                nodes=None,
                enable_auto_scale=True,
                auto_scale_formula=formula,
                auto_scale_evaluation_interval=timedelta(minutes=5),
            )
        )
    wait_until(lambda: all(batch_client.get_pool(p).auto_scale_run for p in ("cli-auto", "cli-auto-broken")))
    return "cli-auto", "cli-auto-broken"


def test_pools_list_table_and_json(cli, azbatch_default, busy_pool, autoscale_pools):
    text = cli("pools", "list")
    data = cli("pools", "list", "--output", "json")

    assert text.code == 0, text.err
    header, rows = table(text.lines)
    assert header == [
        "pool",
        "idle",
        "idle for",
        "idle too long",
        "$/hour",
        "state",
        "allocation",
        "vm size",
        "dedicated",
        "spot",
        "autoscale",
        "nodes",
        "resize errors",
    ]
    by_id = {row[0]: row for row in rows}
    price = load_catalog().get("standard_d2s_v3").hourly_usd
    assert by_id["cli-pool"] == [
        "cli-pool",
        "no",
        "",
        "",
        f"${price:.4f}",
        "active",
        "steady",
        "standard_d2s_v3",
        "1/1",
        "0/0",
        "no",
        "1 running",
        "",
    ]
    assert by_id["cli-auto"] == [
        "cli-auto",
        "no nodes",
        "",
        "",
        "$0.0000",
        "active",
        "steady",
        "standard_d2s_v3",
        "0/0",
        "0/0",
        "yes",
        "",
        "",
    ]
    pools = {pool["id"]: pool for pool in json.loads(data.out)}
    assert pools["cli-pool"] == {
        "id": "cli-pool",
        "state": "active",
        "allocation_state": "steady",
        "vm_size": "standard_d2s_v3",
        "task_slots_per_node": 2,
        "dedicated_nodes": {"current": 1, "target": 1},
        "low_priority_nodes": {"current": 0, "target": 0},
        "auto_scale": False,
        "nodes_by_state": {"running": 1},
        "resize_errors": [],
        "idle": "no",
        "hourly_usd": price,
        "idle_seconds": None,
        # A fixed pool: the shortest evaluation interval Batch allows (5 minutes) and [azbatch] idle_node_margin.
        "idle_threshold_seconds": 600.0,
        "idle_too_long": False,
    }
    assert pools["cli-auto"]["idle_threshold_seconds"] == 600.0  # its own interval, 5 minutes


def test_an_idle_pool_is_shown_with_its_cost_and_deleted(cli, azbatch_default, batch_client, monkeypatch):
    batch_client.create_pool(pool_options("cli-idle", nodes=2))
    wait_until(
        lambda: [node.state for node in batch_client.list_nodes("cli-idle")] == [m.BatchNodeState.IDLE] * 2,
        what="two idle nodes",
    )
    price = load_catalog().get("standard_d2s_v3").hourly_usd

    listed = cli("pools", "list")
    _, rows = table(listed.lines)
    idle = {row[0]: row for row in rows}["cli-idle"]
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))  # not a terminal: nothing is asked
    without_yes = cli("pools", "delete", "cli-idle")

    assert idle[:2] == ["cli-idle", "yes"]
    assert re.fullmatch(r"\d+\.\ds", idle[2])  # how long its longest-idle node has been idle
    assert idle[3:5] == ["", f"${2 * price:.4f}"]  # not for long
    assert "have nodes but run no task" in listed.error
    assert "`airflow azbatch pools delete POOL` removes one" in listed.error
    assert (without_yes.code, without_yes.out) == (1, "")
    assert without_yes.error == "Not deleted: confirm with --yes to delete Batch pool cli-idle (no terminal to ask on)"
    assert batch_client.get_pool("cli-idle").id == "cli-idle"

    monkeypatch.setattr("sys.stdin", _Terminal("n\n"))
    declined = cli("pools", "delete", "cli-idle")
    monkeypatch.setattr("sys.stdin", _Terminal("y\n"))
    confirmed = cli("pools", "delete", "cli-idle")
    again = cli("pools", "delete", "cli-idle", "--yes")

    assert declined.code == 1
    assert declined.error.split("\n") == [
        "Delete Batch pool cli-idle (standard_d2s_v3, 2 node(s))? [y/N]",
        "Not confirmed: nothing was done (--yes to skip the question)",
    ]
    assert (confirmed.code, confirmed.out) == (0, "Batch pool cli-idle deleted\n")
    assert [pool.id for pool in batch_client.list_pools() if pool.id == "cli-idle"] == []
    assert (again.code, again.error) == (1, "Pool 'cli-idle' does not exist in Batch account 'devbatchaccount1'")


class _Terminal(io.StringIO):
    """Standard input as a terminal gives it: answers to read, and isatty."""

    def isatty(self) -> bool:
        return True


def test_pools_describe_nodes_and_running_tasks(cli, azbatch_default, batch_client, busy_pool):
    pool = batch_client.get_pool(busy_pool)
    (node,) = batch_client.list_nodes(busy_pool)
    started = batch_client.get_task("cli-pool-job", "sleeper").execution_info.start_time

    text = cli("pools", "describe", busy_pool)
    data = cli("pools", "describe", busy_pool, "-o", "json")

    assert text.code == 0, text.err
    assert text.lines[:10] == [
        "Pool:            cli-pool",
        "State:           active",
        f"Allocation:      steady since {utc(pool.allocation_state_transition_time)}",
        "VM size:         standard_d2s_v3, 2 task slots per node",
        f"Created:         {utc(pool.creation_time)}",
        "Dedicated nodes: 1 (target 1)",
        "Spot nodes:      0 (target 0)",
        "Nodes:           1 running",
        "Autoscale:       off",
        "",
    ]
    assert text.lines[10] == "Nodes:"
    header, rows = table(text.lines[11:14])
    assert header == ["node", "state", "running tasks", "start task", "errors"]
    assert rows == [[node.id, "running", "1", "", ""]]
    assert text.lines[14:16] == ["", "Running tasks:"]
    header, rows = table(text.lines[16:])
    assert header == ["job", "task", "node", "started"]
    assert rows == [["cli-pool-job", "sleeper", node.id, utc(started)]]

    document = json.loads(data.out)
    assert document["nodes"] == [
        {
            "id": node.id,
            "state": "running",
            "running_tasks": 1,
            "running_task_slots": 1,
            "start_task": None,
            "errors": [],
        }
    ]
    assert document["running_tasks"] == [
        {"job_id": "cli-pool-job", "task_id": "sleeper", "node_id": node.id, "start_time": iso(started)}
    ]
    assert document["auto_scale"] == {
        "enabled": False,
        "formula": None,
        "evaluation_interval_seconds": None,
        "last_evaluation": None,
    }


def test_pools_describe_autoscale_formula_and_its_evaluation(cli, azbatch_default, batch_client, autoscale_pools):
    good, broken = autoscale_pools
    good_run = batch_client.get_pool(good).auto_scale_run
    broken_run = batch_client.get_pool(broken).auto_scale_run

    text = cli("pools", "describe", good)
    failing = cli("pools", "describe", broken, "-o", "yaml")

    assert text.code == 0, text.err
    start = text.lines.index("Autoscale:         on, evaluated every 5m 00s")
    assert text.lines[start - 1] == "Nodes:             none"
    assert text.lines[start + 1 : start + 7] == [
        "Formula:           $TargetDedicatedNodes = min(2, $PendingTasks.GetSample(1));",
        "                   $NodeDeallocationOption = taskcompletion;",
        f"Last evaluation:   {utc(good_run.timestamp)}",
        "Evaluation result: $TargetDedicatedNodes=0",
        "                   $TargetLowPriorityNodes=0",
        "                   $NodeDeallocationOption=taskcompletion",
    ]
    assert failing.code == 0, failing.err
    assert yaml.safe_load(failing.out)["auto_scale"] == {
        "enabled": True,
        "formula": "$TargetDedicatedNodes = nosuchfunction(1);",
        "evaluation_interval_seconds": 300.0,
        "last_evaluation": {
            "timestamp": iso(broken_run.timestamp),
            "results": None,
            "error": {
                "code": "InvalidPropertyValue",
                "message": "The value provided for one of the properties in the request body is invalid.",
                "details": {},
            },
        },
    }


def test_pools_describe_resize_errors(cli, monkeypatch):
    with run_local_batch_service(extra_args=["--quiet", "--node-quota", "1"]) as service:
        monkeypatch.setenv("AIRFLOW_CONN_AZBATCH_DEFAULT", azbatch_connection_json(service))
        from azure.batch import BatchClient
        from azure.core.credentials import AzureNamedKeyCredential

        client = BatchClient(service.url, AzureNamedKeyCredential(service.account_name, service.account_key))
        client.create_pool(pool_options("too-big", nodes=3))
        wait_until(
            lambda: (
                client.get_pool("too-big").resize_errors
                and [node.state for node in client.list_nodes("too-big")] == [m.BatchNodeState.IDLE]
            ),
            what="the quota's resize error, and the one node it allows idle",
        )
        error = client.get_pool("too-big").resize_errors[0]

        text = cli("pools", "describe", "too-big")
        listed = cli("pools", "list", "-o", "json")
        client.close()

    assert text.lines[5:10] == [
        "Dedicated nodes: 1 (target 3)",
        "Spot nodes:      0 (target 0)",
        "Nodes:           1 idle",
        "Autoscale:       off",
        "Resize errors:   AccountCoreQuotaReached: The specified account has reached core quota",
    ]
    (pool,) = json.loads(listed.out)
    assert pool["resize_errors"] == [
        {"code": "AccountCoreQuotaReached", "message": "The specified account has reached core quota", "details": {}}
    ]
    assert (error.code, error.message) == ("AccountCoreQuotaReached", "The specified account has reached core quota")


def test_pools_describe_unknown_pool(cli, azbatch_default):
    result = cli("pools", "describe", "no-such-pool")

    assert (result.code, result.out) == (1, "")
    assert result.error == "Pool 'no-such-pool' does not exist in Batch account 'devbatchaccount1'"
