"""The unmodified azure-batch 15.x sync client drives a whole life cycle against the local service."""

from __future__ import annotations

import uuid

import pytest
from azure.batch import models as m
from azure.batch.models._models import BatchJobTerminateOptions
from azure.core.exceptions import ResourceExistsError, ResourceNotFoundError

from tests import sdk_models
from tests.helpers import sh, wait_until

GROWING = sh('i=1; while [ $i -le 40 ]; do echo "line $i"; i=$((i+1)); sleep 0.05; done')


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _nodes_idle(client, pool_id, count):
    nodes = list(client.list_nodes(pool_id))
    return len(nodes) == count and all(node.state == m.BatchNodeState.IDLE for node in nodes) and nodes


def test_explicit_pool_job_250_tasks_growing_output_counts_terminate_delete(batch_client):
    client = batch_client
    pool_id, job_id = _unique("pool"), _unique("job")
    client.create_pool(sdk_models.pool(pool_id, nodes=2, slots=4))
    pool = client.get_pool(pool_id)
    assert pool.allocation_state == m.AllocationState.RESIZING
    assert pool.target_dedicated_nodes == 2
    nodes = wait_until(lambda: _nodes_idle(client, pool_id, 2), what="two idle nodes")
    assert {node.vm_size for node in nodes} == {"standard_d2s_v3"}
    assert wait_until(lambda: client.get_pool(pool_id).allocation_state == m.AllocationState.STEADY)

    client.create_job(m.BatchJobCreateOptions(id=job_id, pool_info=m.BatchPoolInfo(pool_id=pool_id)))
    client.create_task(job_id, m.BatchTaskCreateOptions(id="grower", command_line=GROWING))
    result = client.create_tasks(
        job_id,
        [m.BatchTaskCreateOptions(id=f"t{i:03d}", command_line=f"echo task {i}") for i in range(250)],
        max_concurrency=4,
    )
    assert len(result.result_values) == 250
    assert {item.status for item in result.result_values} == {m.BatchTaskAddStatus.SUCCESS}

    # Read the growing stdout with ranged reads while the task runs, the way a log tail does.
    seen = b""
    reads_while_running = 0
    while True:
        task = client.get_task(job_id, "grower")
        if task.state == m.BatchTaskState.ACTIVE:
            continue
        size = client.get_task_file_properties(job_id, "grower", "stdout.txt").content_length
        if size > len(seen):
            chunk = b"".join(
                client.download_task_file(job_id, "grower", "stdout.txt", ocp_range=f"bytes={len(seen)}-{size - 1}")
            )
            assert len(chunk) == size - len(seen)
            seen += chunk
            if task.state == m.BatchTaskState.RUNNING:
                reads_while_running += 1
        if task.state == m.BatchTaskState.COMPLETED and size == len(seen):
            break
    assert seen.decode().splitlines() == [f"line {i}" for i in range(1, 41)]
    assert reads_while_running >= 2

    counts = wait_until(
        lambda: (c := client.get_job_task_counts(job_id)).task_counts.completed == 251 and c,
        what="all tasks done",
    )
    assert counts.task_counts.succeeded == 251
    assert counts.task_counts.failed == 0
    assert counts.task_slot_counts.completed == 251
    done = client.get_task(job_id, "t042")
    assert done.execution_info.exit_code == 0
    assert done.execution_info.result == m.BatchTaskExecutionResult.SUCCESS
    assert done.node_info.pool_id == pool_id
    assert b"".join(client.download_task_file(job_id, "t042", "stdout.txt")) == b"task 42\n"
    listed = sorted(t.id for t in client.list_tasks(job_id, filter="state eq 'completed'", select=["id"]))
    assert len(listed) == 251

    client.begin_terminate_job(job_id, BatchJobTerminateOptions(termination_reason="Done"), polling_interval=1).result()
    job = client.get_job(job_id)
    assert job.state == m.BatchJobState.COMPLETED
    assert job.execution_info.termination_reason == "Done"
    assert job.execution_info.end_time is not None

    client.begin_delete_job(job_id, polling_interval=1).result()
    with pytest.raises(ResourceNotFoundError) as missing:
        client.get_job(job_id)
    assert missing.value.error.code == "JobNotFound"
    client.begin_delete_pool(pool_id, polling_interval=1).result()
    with pytest.raises(ResourceNotFoundError):
        client.get_pool(pool_id)


def test_auto_pool_is_created_with_the_job_and_deleted_when_it_completes(batch_client):
    client = batch_client
    job_id = _unique("auto")
    client.create_job(
        m.BatchJobCreateOptions(
            id=job_id,
            pool_info=sdk_models.auto_pool_info(nodes=1, prefix="af"),
            all_tasks_complete_mode=m.BatchAllTasksCompleteMode.NO_ACTION,
        )
    )
    pool_id = client.get_job(job_id).execution_info.pool_id
    assert pool_id.startswith("af_")
    wait_until(lambda: _nodes_idle(client, pool_id, 1), what="auto-pool node idle")
    client.create_task(job_id, m.BatchTaskCreateOptions(id="only", command_line="echo from auto pool"))
    client.update_job(
        job_id, m.BatchJobUpdateOptions(all_tasks_complete_mode=m.BatchAllTasksCompleteMode.TERMINATE_JOB)
    )
    job = wait_until(lambda: (j := client.get_job(job_id)).state == m.BatchJobState.COMPLETED and j, what="job end")
    assert job.execution_info.termination_reason == "AllTasksComplete"
    wait_until(lambda: pool_id not in {p.id for p in client.list_pools()}, what="auto pool deleted")


def test_duplicates_are_reported_like_the_service(batch_client):
    client = batch_client
    job_id = _unique("dup")
    client.create_job(m.BatchJobCreateOptions(id=job_id, pool_info=m.BatchPoolInfo(pool_id="nowhere")))
    with pytest.raises(ResourceExistsError) as exists:
        client.create_job(m.BatchJobCreateOptions(id=job_id, pool_info=m.BatchPoolInfo(pool_id="nowhere")))
    assert exists.value.error.code == "JobExists"
    assert exists.value.model.message.value.startswith("The specified job already exists.\nRequestId:")
    client.create_task(job_id, m.BatchTaskCreateOptions(id="a", command_line="true"))
    result = client.create_task_collection(
        job_id,
        m.BatchTaskGroup(
            task_values=[
                m.BatchTaskCreateOptions(id="a", command_line="true"),
                m.BatchTaskCreateOptions(id="b", command_line="true"),
            ]
        ),
    )
    by_id = {item.task_id: item for item in result.result_values}
    assert by_id["a"].status == m.BatchTaskAddStatus.CLIENT_ERROR
    assert by_id["a"].error.code == "TaskExists"
    assert by_id["b"].status == m.BatchTaskAddStatus.SUCCESS
    # create_tasks treats TaskExists as success, so a re-submit is harmless.
    again = client.create_tasks(job_id, [m.BatchTaskCreateOptions(id=x, command_line="true") for x in "ab"])
    assert len(again.result_values) == 2
    client.begin_delete_job(job_id, polling_interval=1).result()
