"""The times the service reports, faithful enough to work out cost and utilisation from them."""

from __future__ import annotations

import uuid

import pytest
from azure.batch import models as m
from azure.batch.models._models import BatchJobTerminateOptions
from azure.core.exceptions import ResourceNotFoundError

from tests import sdk_models
from tests.helpers import sh, wait_until


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _task_state(client, job_id: str, task_id: str, state: m.BatchTaskState):
    return wait_until(
        lambda: (task := client.get_task(job_id, task_id)).state == state and task, what=f"{task_id} {state}"
    )


def _node_state(client, pool_id: str, node_id: str, state: m.BatchNodeState):
    return wait_until(lambda: (node := client.get_node(pool_id, node_id)).state == state and node, what=str(state))


def test_node_pool_task_and_job_times_follow_each_other(batch_client):
    client = batch_client
    pool_id, job_id = _unique("times"), _unique("times")
    client.create_pool(sdk_models.pool(pool_id, nodes=1))
    created = client.get_pool(pool_id)
    assert created.allocation_state == m.AllocationState.RESIZING
    assert created.state_transition_time == created.creation_time
    assert created.allocation_state_transition_time >= created.creation_time
    node_id = wait_until(lambda: [node.id for node in client.list_nodes(pool_id)], what="a node")[0]
    idle = _node_state(client, pool_id, node_id, m.BatchNodeState.IDLE)
    assert created.creation_time <= idle.allocation_time <= idle.last_boot_time <= idle.state_transition_time
    steady = wait_until(lambda: (p := client.get_pool(pool_id)).allocation_state == m.AllocationState.STEADY and p)
    assert idle.state_transition_time <= steady.allocation_state_transition_time

    client.create_job(m.BatchJobCreateOptions(id=job_id, pool_info=m.BatchPoolInfo(pool_id=pool_id)))
    job = client.get_job(job_id)
    assert job.execution_info.start_time == job.creation_time
    assert job.execution_info.end_time is None
    client.create_task(job_id, m.BatchTaskCreateOptions(id="work", command_line="sleep 0.5"))
    running = _task_state(client, job_id, "work", m.BatchTaskState.RUNNING)
    busy = client.get_node(pool_id, node_id)
    assert busy.state == m.BatchNodeState.RUNNING
    assert idle.last_boot_time <= running.execution_info.start_time <= busy.state_transition_time
    assert running.execution_info.end_time is None

    done = _task_state(client, job_id, "work", m.BatchTaskState.COMPLETED)
    info = done.execution_info
    assert info.start_time == running.execution_info.start_time
    assert info.start_time < info.end_time
    assert (info.retry_count, info.requeue_count) == (0, 0)
    idle_again = _node_state(client, pool_id, node_id, m.BatchNodeState.IDLE)
    assert info.end_time <= idle_again.state_transition_time
    (recent,) = idle_again.recent_tasks
    assert (recent.task_id, recent.execution_info.start_time, recent.execution_info.end_time) == (
        "work",
        info.start_time,
        info.end_time,
    )
    # What the node reports does not move on: allocation and boot happened once.
    assert (idle_again.allocation_time, idle_again.last_boot_time) == (idle.allocation_time, idle.last_boot_time)

    client.begin_terminate_job(job_id, BatchJobTerminateOptions(termination_reason="done"), polling_interval=1).result()
    ended = client.get_job(job_id)
    assert ended.execution_info.end_time == ended.state_transition_time
    assert info.end_time <= ended.execution_info.end_time
    client.begin_delete_job(job_id, polling_interval=1).result()
    client.begin_delete_pool(pool_id, polling_interval=1).result()


def test_a_retried_task_keeps_each_attempt_on_the_node(batch_client, shared_pool, tmp_path):
    client = batch_client
    job_id = _unique("retry")
    client.create_job(m.BatchJobCreateOptions(id=job_id, pool_info=m.BatchPoolInfo(pool_id=shared_pool)))
    marker = tmp_path / "tried"
    client.create_task(
        job_id,
        m.BatchTaskCreateOptions(
            id="flaky",
            command_line=sh(f"if [ -e {marker} ]; then exit 0; fi; touch {marker}; exit 3"),
            constraints=m.BatchTaskConstraints(max_task_retry_count=1),
        ),
    )
    done = _task_state(client, job_id, "flaky", m.BatchTaskState.COMPLETED)
    info = done.execution_info
    assert (info.retry_count, info.requeue_count, info.exit_code) == (1, 0, 0)
    assert info.last_retry_time == info.start_time
    runs = [
        recent.execution_info
        for node in client.list_nodes(shared_pool)
        for recent in node.recent_tasks or []
        if recent.job_id == job_id
    ]
    first, second = sorted(runs, key=lambda run: run.start_time)
    assert (first.exit_code, first.result) == (3, m.BatchTaskExecutionResult.FAILURE)
    assert first.start_time < first.end_time <= second.start_time
    assert (second.start_time, second.end_time, second.exit_code) == (info.start_time, info.end_time, 0)
    client.begin_delete_job(job_id, polling_interval=1).result()


def test_nodes_stay_listed_while_a_pool_shrinks_and_a_requeued_task_says_so(batch_client):
    client = batch_client
    pool_id, job_id = _unique("shrink"), _unique("shrink")
    client.create_pool(sdk_models.pool(pool_id, nodes=2))
    wait_until(lambda: {n.state for n in client.list_nodes(pool_id)} == {m.BatchNodeState.IDLE}, what="2 idle nodes")
    removed = {node.id for node in client.list_nodes(pool_id)}
    client.create_job(m.BatchJobCreateOptions(id=job_id, pool_info=m.BatchPoolInfo(pool_id=pool_id)))
    client.create_task(job_id, m.BatchTaskCreateOptions(id="long", command_line="sleep 30"))
    _task_state(client, job_id, "long", m.BatchTaskState.RUNNING)

    resize = client.begin_resize_pool(
        pool_id,
        m.BatchPoolResizeOptions(
            target_dedicated_nodes=0, node_deallocation_option=m.BatchNodeDeallocationOption.REQUEUE
        ),
        polling_interval=1,
    )
    seen_while_resizing = []
    while client.get_pool(pool_id).allocation_state == m.AllocationState.RESIZING:
        seen_while_resizing.append({node.id: node.state for node in client.list_nodes(pool_id)})
    resize.result()
    assert seen_while_resizing
    assert all(set(listing) <= removed for listing in seen_while_resizing)
    assert list(client.list_nodes(pool_id)) == []
    for node_id in removed:
        with pytest.raises(ResourceNotFoundError) as missing:
            client.get_node(pool_id, node_id)
        assert missing.value.error.code == "NodeNotFound"

    requeued = client.get_task(job_id, "long")
    assert requeued.state == m.BatchTaskState.ACTIVE
    assert requeued.execution_info.requeue_count == 1
    assert requeued.execution_info.last_requeue_time is not None
    assert requeued.execution_info.start_time is None
    client.begin_delete_job(job_id, polling_interval=1).result()
    client.begin_delete_pool(pool_id, polling_interval=1).result()


def test_an_auto_pool_lists_its_nodes_until_it_is_deleted(batch_client):
    client = batch_client
    job_id = _unique("autolist")
    client.create_job(
        m.BatchJobCreateOptions(
            id=job_id,
            pool_info=sdk_models.auto_pool_info(nodes=1),
            all_tasks_complete_mode=m.BatchAllTasksCompleteMode.TERMINATE_JOB,
        )
    )
    pool_id = client.get_job(job_id).execution_info.pool_id
    client.create_task(job_id, m.BatchTaskCreateOptions(id="only", command_line="true"))
    wait_until(lambda: client.get_job(job_id).state == m.BatchJobState.COMPLETED, what="job completed")
    listed_after_completion = 0
    while True:
        try:
            nodes = list(client.list_nodes(pool_id))
        except ResourceNotFoundError:
            break
        assert len(nodes) <= 1
        listed_after_completion += 1
    assert listed_after_completion >= 1
    with pytest.raises(ResourceNotFoundError) as missing:
        list(client.list_nodes(pool_id))
    assert missing.value.error.code == "PoolNotFound"
