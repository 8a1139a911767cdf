"""A node that fails under its tasks (``POST /_emulator/pools/{pool}/nodes/{node}/unusable``): ``unusable``, its
``errors`` the ones asked for, its running tasks requeued (model/node_faults.py)."""

from __future__ import annotations

import json
import urllib.error
import uuid

import pytest
from azure.batch import models as m

from tests import sdk_models
from tests.helpers import sh, wait_until

FULL = ("DiskFull", "There is not enough space on the node's disk.", {"Path": "/mnt/batch/tasks"})


def _pool(client, nodes: int) -> tuple[str, list[str]]:
    pool_id = f"unusable-{uuid.uuid4().hex[:8]}"
    client.create_pool(sdk_models.pool(pool_id, nodes=nodes))
    idle = wait_until(
        lambda: (
            len(ids := [n.id for n in client.list_nodes(pool_id) if n.state == m.BatchNodeState.IDLE]) == nodes and ids
        ),
        what="the pool's nodes idle",
    )
    return pool_id, idle


def test_a_node_made_unusable_says_why_and_its_running_task_runs_again_elsewhere(batch_client, local_batch_service):
    client = batch_client
    pool_id, _ = _pool(client, 2)
    job_id = f"unusable-{uuid.uuid4().hex[:8]}"
    try:
        client.create_job(m.BatchJobCreateOptions(id=job_id, pool_info=m.BatchPoolInfo(pool_id=pool_id)))
        client.create_task(job_id, m.BatchTaskCreateOptions(id="work", command_line=sh("sleep 2; echo finished")))
        task = wait_until(
            lambda: (task := client.get_task(job_id, "work")).state == m.BatchTaskState.RUNNING and task,
            what="the task running",
        )
        failed = task.node_info.node_id
        answer = local_batch_service.make_unusable(pool_id, failed, *FULL)
        expected = {"code": FULL[0], "message": FULL[1], "errorDetails": [{"name": "Path", "value": FULL[2]["Path"]}]}
        assert answer == {"pool": pool_id, "node": failed, "state": "unusable", "errors": [expected]}
        node = client.get_node(pool_id, failed)
        assert node.state == m.BatchNodeState.UNUSABLE
        assert [(e.code, e.message, [(d.name, d.value) for d in e.error_details]) for e in node.errors] == [
            (FULL[0], FULL[1], [("Path", FULL[2]["Path"])])
        ]
        # Requeued, neither as a retry nor as a user's requeue, and run on the other node.
        task = wait_until(
            lambda: (task := client.get_task(job_id, "work")).state == m.BatchTaskState.COMPLETED and task,
            what="the task to run again",
        )
        assert task.execution_info.result == m.BatchTaskExecutionResult.SUCCESS
        assert (task.execution_info.retry_count, task.execution_info.requeue_count) == (0, 0)
        assert task.node_info.node_id != failed
        # The failed node stays unusable, its counts say so.
        assert client.get_node(pool_id, failed).state == m.BatchNodeState.UNUSABLE
        counts = {entry.pool_id: entry for entry in client.list_pool_node_counts()}[pool_id]
        assert counts.dedicated.unusable == 1
    finally:
        client.begin_delete_pool(pool_id, polling_interval=1).result()


def test_only_a_node_that_is_up_is_made_unusable_and_only_with_an_error(batch_client, local_batch_service):
    client = batch_client
    pool_id, (node_id,) = _pool(client, 1)
    try:
        with pytest.raises(urllib.error.HTTPError) as info:
            local_batch_service._admin("POST", f"pools/{pool_id}/nodes/{node_id}/unusable", '{"code": "DiskFull"}')
        assert info.value.code == 400
        assert "message" in json.loads(info.value.read())["error"]
        with pytest.raises(urllib.error.HTTPError) as info:
            local_batch_service.make_unusable(pool_id, "tvmps_no_such_node", *FULL[:2])
        assert info.value.code == 404
        local_batch_service.make_unusable(pool_id, node_id, *FULL[:2])
        with pytest.raises(urllib.error.HTTPError) as info:
            local_batch_service.make_unusable(pool_id, node_id, *FULL[:2])
        assert info.value.code == 409
        assert json.loads(info.value.read())["code"] == "NodeNotUp"
        assert [error.code for error in client.get_node(pool_id, node_id).errors] == [FULL[0]]
    finally:
        client.begin_delete_pool(pool_id, polling_interval=1).result()
