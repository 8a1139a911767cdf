"""Spot nodes: preemption (the node state ``preempted``, its tasks requeued, the node back with its id) and Spot
capacity (a pool seeks the Spot nodes Azure has no capacity for), as https://learn.microsoft.com/azure/batch/batch-spot-vms
describes them."""

from __future__ import annotations

import json
import urllib.error
import uuid
from datetime import timedelta

import pytest
from azure.batch import models as m

from tests import sdk_models
from tests.helpers import sh, wait_until

READ = (
    "preempted = max($PreemptedNodeCount.GetSample(1)); spot = $CurrentLowPriorityNodes; "
    "usable = max($UsableNodeCount.GetSample(1));"
)


def _spot_pool(client, nodes: int, formula: str | None = None) -> str:
    pool_id = f"spot-{uuid.uuid4().hex[:8]}"
    options = m.BatchPoolCreateOptions(
        id=pool_id,
        vm_size="standard_d2s_v3",
        virtual_machine_configuration=sdk_models.UBUNTU,
        **(
            {
                "enable_auto_scale": True,
                "auto_scale_formula": formula,
                "auto_scale_evaluation_interval": timedelta(minutes=5),
            }
            if formula
            else {"target_low_priority_nodes": nodes}
        ),
    )
    client.create_pool(options)
    return pool_id


def _nodes(client, pool_id: str) -> dict[str, m.BatchNode]:
    return {node.id: node for node in client.list_nodes(pool_id)}


def _states(client, pool_id: str) -> list[str]:
    return sorted(str(getattr(node.state, "value", node.state)) for node in client.list_nodes(pool_id))


def _read(client, pool_id: str) -> dict[str, str]:
    run = client.evaluate_pool_auto_scale(pool_id, m.BatchPoolEvaluateAutoScaleOptions(auto_scale_formula=READ))
    values = dict(item.split("=", 1) for item in (run.results or "").split(";") if "=" in item)
    return {name: values.get(name, "") for name in ("preempted", "spot", "usable")}


@pytest.fixture
def spot_capacity(local_batch_service):
    """Sets the account's Spot capacity for the test, and lifts the limit after it."""
    yield local_batch_service.set_spot_capacity
    local_batch_service.set_spot_capacity(None)


def test_a_preempted_nodes_running_task_is_requeued_and_runs_again_when_the_node_comes_back(
    batch_client, local_batch_service, spot_capacity
):
    client = batch_client
    pool_id = _spot_pool(client, 1, "$TargetLowPriorityNodes = 1;")
    job_id = f"spot-{uuid.uuid4().hex[:8]}"
    try:
        wait_until(lambda: _states(client, pool_id) == ["idle"], what="a Spot node")
        (node_id,) = _nodes(client, pool_id)
        assert _nodes(client, pool_id)[node_id].is_dedicated is False
        client.create_job(m.BatchJobCreateOptions(id=job_id, pool_info=m.BatchPoolInfo(pool_id=pool_id)))
        client.create_task(job_id, m.BatchTaskCreateOptions(id="work", command_line=sh("sleep 2; echo finished")))
        wait_until(lambda: client.get_task(job_id, "work").state == m.BatchTaskState.RUNNING, what="the task running")
        first_start = client.get_task(job_id, "work").execution_info.start_time
        spot_capacity(0)  # no capacity: the node stays preempted
        local_batch_service.preempt(pool_id, node_id)
        node = client.get_node(pool_id, node_id)
        assert node.state == m.BatchNodeState.PREEMPTED
        assert node.last_boot_time is None
        # Requeued, as Batch does: active again, neither a retry nor a requeue "as the result of a user request".
        task = wait_until(
            lambda: (task := client.get_task(job_id, "work")).state == m.BatchTaskState.ACTIVE and task,
            what="the task requeued",
        )
        assert (task.execution_info.retry_count, task.execution_info.requeue_count) == (0, 0)
        assert task.execution_info.start_time is None
        # Still listed and counted as one of the pool's Spot nodes; none usable.
        assert client.get_pool(pool_id).current_low_priority_nodes == 1
        wait_until(
            lambda: _read(client, pool_id) == {"preempted": "1", "spot": "1", "usable": "0"},
            what="$PreemptedNodeCount 1",
        )
        counts = {entry.pool_id: entry for entry in client.list_pool_node_counts()}[pool_id]
        assert (counts.low_priority.preempted, counts.low_priority.total) == (1, 1)
        # Capacity returns: the node comes back with its id, and the task runs again there.
        spot_capacity(None)
        task = wait_until(
            lambda: (task := client.get_task(job_id, "work")).state == m.BatchTaskState.COMPLETED and task,
            what="the task to run again",
        )
        assert task.execution_info.result == m.BatchTaskExecutionResult.SUCCESS
        assert task.execution_info.start_time > first_start
        assert task.node_info.node_id == node_id
        assert client.get_node(pool_id, node_id).last_boot_time is not None
        assert _read(client, pool_id)["preempted"] in ("0", "1")  # the last sample may predate the recovery
        wait_until(lambda: _read(client, pool_id)["preempted"] == "0", what="$PreemptedNodeCount 0")
    finally:
        client.begin_delete_job(job_id, polling_interval=1)
        client.begin_delete_pool(pool_id, polling_interval=1).result()


def test_a_pool_seeks_the_spot_nodes_azure_has_no_capacity_for(batch_client, spot_capacity):
    client = batch_client
    spot_capacity(0)
    pool_id = _spot_pool(client, 2)
    try:
        pool = client.get_pool(pool_id)
        assert (pool.allocation_state, pool.current_low_priority_nodes) == (m.AllocationState.RESIZING, 0)
        assert not pool.resize_errors
        spot_capacity(1)
        wait_until(lambda: _states(client, pool_id) == ["idle"], what="one Spot node")
        assert client.get_pool(pool_id).allocation_state == m.AllocationState.RESIZING
        spot_capacity(None)
        wait_until(lambda: _states(client, pool_id) == ["idle", "idle"], what="both Spot nodes")
        wait_until(lambda: client.get_pool(pool_id).allocation_state == m.AllocationState.STEADY, what="a steady pool")
    finally:
        client.begin_delete_pool(pool_id, polling_interval=1).result()


def test_only_spot_nodes_that_are_up_can_be_preempted(batch_client, local_batch_service):
    client = batch_client
    pool_id = f"dedicated-{uuid.uuid4().hex[:8]}"
    client.create_pool(sdk_models.pool(pool_id, nodes=1))
    try:
        node_id = wait_until(lambda: next(iter(_nodes(client, pool_id)), None), what="a node")
        with pytest.raises(urllib.error.HTTPError) as info:
            local_batch_service.preempt(pool_id, node_id)
        assert info.value.code == 409
        assert json.loads(info.value.read())["code"] == "NodeNotSpot"
        with pytest.raises(urllib.error.HTTPError) as info:
            local_batch_service.preempt(pool_id, "tvmps_no_such_node")
        assert info.value.code == 404
    finally:
        client.begin_delete_pool(pool_id, polling_interval=1).result()
