"""``airflow azbatch pools nodes`` and ``airflow azbatch pools upload-logs`` against the local Batch service, with
Azurite as the connection's storage account."""

from __future__ import annotations

import json
import uuid

import pytest
from azure.batch import models as m
from azure.storage.blob import BlobServiceClient

from tests.cli.batch_jobs import table
from tests.helpers import pool_options, wait_until


@pytest.fixture(scope="module")
def broken_pool(batch_client):
    """One node, whose start task failed."""
    pool_id = f"cli-broken-{uuid.uuid4().hex[:6]}"
    options = pool_options(pool_id, nodes=1)
    options.start_task = m.BatchStartTask(
        command_line="/bin/sh -c 'echo no GPU driver >&2; exit 4'", wait_for_success=True
    )
    batch_client.create_pool(options)
    wait_until(
        lambda: [n for n in batch_client.list_nodes(pool_id) if n.state == m.BatchNodeState.START_TASK_FAILED],
        what="the start task failed",
    )
    yield pool_id
    batch_client.begin_delete_pool(pool_id)


def test_pools_nodes_lists_state_scheduling_address_start_task_and_errors(cli, azbatch_default, broken_pool):
    text = cli("pools", "nodes", broken_pool)
    data = cli("pools", "nodes", broken_pool, "--output", "json")

    assert text.code == 0, text.err
    header, rows = table(text.lines)
    assert header == ["node", "state", "scheduling", "kind", "ip", "allocated", "running", "start task", "errors"]
    (row,) = rows
    assert row[1:5] == ["starttaskfailed", "enabled", "dedicated", row[4]]
    assert row[4].startswith("127.")
    assert (
        row[7] == "completed, exit code 4 (FailureExitCode: The task exited with an exit code representing a failure)"
    )
    assert f"1 node(s) failed: `airflow azbatch pools upload-logs {broken_pool}`" in text.err
    (node,) = json.loads(data.out)
    assert (node["state"], node["scheduling"], node["kind"]) == ("starttaskfailed", "enabled", "dedicated")


def test_pools_nodes_of_an_unknown_pool(cli, azbatch_default):
    result = cli("pools", "nodes", "no-such-pool")
    assert (result.code, result.error) == (
        1,
        "Pool 'no-such-pool' does not exist in Batch account 'devbatchaccount1'",
    )


def test_upload_logs_keeps_the_failed_nodes_logs_and_says_where(cli, azbatch_with_storage, azurite, broken_pool):
    result = cli("pools", "upload-logs", broken_pool, "--output", "json")

    assert result.code == 0, result.err
    (kept,) = json.loads(result.out)
    assert kept["files"] == kept["arrived"] == 3
    assert kept["problem"] is None
    prefix = f"{azurite.url}/azbatch-node-logs/"
    assert kept["url"].startswith(prefix)
    directory = kept["url"][len(prefix) :].rstrip("/")
    assert f"Uploading the Batch service logs of node {kept['node_id']} (pool {broken_pool})" in result.err
    container = BlobServiceClient.from_connection_string(azurite.connection_string).get_container_client(
        "azbatch-node-logs"
    )
    stderr = container.download_blob(f"{directory}/startup/stderr.txt").readall()
    assert stderr == b"no GPU driver\n"
    assert "start task exited with code 4" in container.download_blob(f"{directory}/agent.log").readall().decode()


def test_upload_logs_of_a_named_node_since_a_time_and_the_errors(cli, azbatch_with_storage, broken_pool, batch_client):
    (node,) = batch_client.list_nodes(broken_pool)
    named = cli("pools", "upload-logs", broken_pool, node.id, "--since", "1h")
    assert named.code == 0, named.err
    header, rows = table(named.lines)
    assert header == ["node", "files", "where", "not kept because"]
    assert rows[0][:2] == [node.id, "3"]

    unknown = cli("pools", "upload-logs", broken_pool, "tvmps_nope")
    assert (unknown.code, unknown.error) == (
        1,
        f"Pool {broken_pool} has no node tvmps_nope (`airflow azbatch pools nodes` lists them)",
    )


def test_upload_logs_without_a_storage_account_says_what_to_set(cli, azbatch_default, broken_pool):
    result = cli("pools", "upload-logs", broken_pool)
    assert result.code == 1
    assert "storage_account_url is missing" in result.out
    assert result.error.endswith("The logs of some nodes were not kept (see above)")
