"""Reads that only inform never fail a deferred task, and a waiting job backs off: real deferred tasks and triggers
against the local Batch service (issue 39)."""

from __future__ import annotations

import contextlib
import time
import uuid
from datetime import datetime

import pytest
from airflow.sdk import DAG
from azure.batch import models as m

from airflow_provider_azbatch.hooks.batch import AzureBatchHook
from airflow_provider_azbatch.operators.job import AzureBatchJobOperator
from airflow_provider_azbatch.specs.tasks import TaskSpec
from airflow_provider_azbatch.submission.job import JobSubmission
from airflow_provider_azbatch.submission.reattach import submit
from airflow_provider_azbatch.triggers.job import AzureBatchJobTrigger
from airflow_provider_azbatch.watching.state import WatchState
from tests.airflow_helpers import run_dag
from tests.helpers import BackgroundTrigger, pool_options, wait_until

START = datetime(2026, 1, 1)


@pytest.mark.serial  # a fault on the session's service: no other test in between
def test_a_credential_refused_the_pools_node_reads_succeeds_as_its_job_and_says_so_once(
    airflow_db, azbatch_default, shared_pool
):
    azbatch_default.set_faults("Nodes_ListNodes:403")
    try:
        with DAG("node_reads_refused", schedule=None, start_date=START) as dag:
            AzureBatchJobOperator(
                task_id="refused",
                pool_id=shared_pool,
                command="sleep 2; echo over",
                poll_interval=0.3,
                deferrable=True,
            )
        run, logs = run_dag(dag)
        refused = [r for r in azbatch_default.request_log(operations=["Nodes_ListNodes"]) if r["status"] == 403]
    finally:
        azbatch_default.set_faults("")
    assert run.state == "success"
    assert run.get_task_instance("refused").state == "success"
    assert "[main] over" in logs
    job_id = next(line.split()[3] for line in logs if line.startswith("Submitting Batch job"))
    said = (
        f"Batch job {job_id}: the nodes of pool {shared_pool} cannot be read with this connection's credential "
        "(403 AuthorizationFailure: This request is not authorized to perform this operation.): the job is watched "
        "as before, but the idle time of its nodes is not reported, and its Spot nodes are priced as dedicated "
        "ones. Fix: give the connection's credential a role on the Batch account that reads its pools and their "
        "nodes (the built-in Azure Batch Data Contributor does)"
    )
    assert logs.count(said) == 1, [line for line in logs if "cannot be read" in line or "No cost" in line]
    assert not [line for line in logs if line.startswith(("No cost estimate", "No idle time"))]
    assert 1 <= len(refused) <= 2  # the trigger's first look, not a listing a look


@pytest.mark.serial  # a minute of one trigger's requests, counted on the session's service
def test_a_job_of_a_thousand_tasks_waiting_behind_a_busy_pool_costs_at_most_1_2_requests_a_poll(
    local_batch_service, azbatch_default, batch_client
):
    pool = f"busy-{uuid.uuid4().hex[:6]}"
    batch_client.create_pool(pool_options(pool, nodes=1, slots=1))
    hook = AzureBatchHook()
    blocker, waiting = f"blocker-{uuid.uuid4().hex[:6]}", f"waiting-{uuid.uuid4().hex[:6]}"
    try:
        wait_until(lambda: [n.state for n in batch_client.list_nodes(pool)] == [m.BatchNodeState.IDLE], what="node")
        submit(hook, JobSubmission(job_id=blocker, pool_id=pool, tasks=[TaskSpec(id="t", command_line="sleep 300")]))
        wait_until(lambda: hook.get_task_counts(blocker).running == 1, what="the blocker taking the pool's slot")
        tasks = [TaskSpec(id=f"t{i:04d}", command_line="true") for i in range(1000)]
        submit(hook, JobSubmission(job_id=waiting, pool_id=pool, tasks=tasks))
        assert hook.get_task_counts(waiting).active == 1000
        state = WatchState(job_id=waiting, expected_tasks=1000, pool_id=pool).to_json()
        trigger = AzureBatchJobTrigger("azbatch_default", state, poll_interval=1.0, stream_output=False)
        with BackgroundTrigger(trigger):
            wait_until(
                lambda: local_batch_service.request_log(jobs=[waiting], operations=["Jobs_GetJobTaskCounts"]),
                what="the trigger's first look",
            )
            local_batch_service.clear_request_log()
            began = time.time()
            time.sleep(60.0)  # the window measured: a minute of the trigger's requests, nothing to wait for
            served = [r for r in local_batch_service.request_log() if r["at"] <= began + 60.0]
        assert hook.get_task_counts(waiting).active == 1000  # it waited all along
    finally:
        for job in (blocker, waiting):
            with contextlib.suppress(Exception):
                hook.terminate_job(job)
        with contextlib.suppress(Exception):
            batch_client.begin_delete_pool(pool, polling_interval=1)
    by_operation: dict[str, int] = {}
    for request in served:
        by_operation[request["operation"]] = by_operation.get(request["operation"], 0) + 1
    # One listing of the account's jobs a poll; the job's own looks back off (2, 4, 8, 16, 32 s, then a minute).
    assert len(served) / 60.0 <= 1.2, by_operation
    assert by_operation.get("Jobs_GetJobTaskCounts", 0) <= 6, by_operation
