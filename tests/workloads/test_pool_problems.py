"""A job whose pool cannot get nodes fails with the service's cause instead of waiting forever."""

from __future__ import annotations

from datetime import datetime

import pytest
from airflow.sdk import DAG
from azure.batch import BatchClient
from azure.batch import models as m
from azure.core.credentials import AzureNamedKeyCredential

from airflow_provider_azbatch.operators.job import AzureBatchJobOperator
from airflow_provider_azbatch.pools import BatchPool
from local_azure_batch.testing import run_local_batch_service
from tests.airflow_helpers import azbatch_connection_json, run_dag

START = datetime(2026, 1, 1)


@pytest.fixture(scope="module")
def one_node_account():
    """An account with room for one node only (the local service's --node-quota)."""
    with run_local_batch_service(extra_args=["--quiet", "--node-quota", "1"]) as service:
        yield service


@pytest.mark.parametrize("deferrable", [False, True])
def test_a_two_node_task_on_a_one_node_quota_fails_with_the_allocation_error(
    airflow_db, one_node_account, monkeypatch, deferrable
):
    monkeypatch.setenv("AIRFLOW_CONN_AZBATCH_DEFAULT", azbatch_connection_json(one_node_account))
    with DAG(f"quota_{deferrable}", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(
            task_id="wide",
            batch_pool=BatchPool.auto(requirements={"cpus": 1}, max_nodes=2),
            num_nodes=2,
            coordination_command="true",
            command="echo never",
            poll_interval=0.5,
            deferrable=deferrable,
        )
    run, logs = run_dag(dag)
    assert run.state == "failed"
    text = "\n".join(logs)
    job_id = next(line.split()[3] for line in logs if line.startswith("Submitting Batch job"))
    assert f"Batch job {job_id} cannot run: Pool " in text
    assert "got 1 of the nodes it asked for, too few for the waiting tasks (its 1 usable nodes stay idle): " in text
    assert "AccountCoreQuotaReached" in text
    assert "; the job was terminated" in text
    client = BatchClient(
        one_node_account.url, AzureNamedKeyCredential(one_node_account.account_name, one_node_account.account_key)
    )
    assert client.get_job(job_id).state == m.BatchJobState.COMPLETED
    assert client.get_job(job_id).execution_info.termination_reason == "PoolProblem"


@pytest.mark.parametrize("shared", [False, True])
def test_a_vm_size_batch_does_not_know_fails_the_task_and_leaves_nothing(
    airflow_db, local_batch_service, batch_client, azbatch_default, shared
):
    """Batch refuses the pool (or the job's auto-pool) with 400 InvalidPropertyValue; the run fails with it."""
    typo = "standard_nc4as_t4_v9"
    pool = BatchPool.shared(f"typo-{shared}", vm_size=typo) if shared else BatchPool.auto(vm_size=typo)
    jobs_before = {job.id for job in batch_client.list_jobs(select=["id"])}
    pools_before = {pool.id for pool in batch_client.list_pools(select=["id"])}
    with DAG(f"unknown_vm_size_{shared}", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(task_id="typo", batch_pool=pool, command="echo never", poll_interval=0.5)
    run, logs = run_dag(dag)
    assert run.state == "failed"
    text = "\n".join(logs)
    step = "Creating pool typo-True" if shared else "Creating Batch job unknown_vm_size_False-typo-"
    refusal = (
        ": Batch refused the request, so nothing was created: InvalidPropertyValue: The value provided for one of "
        f"the properties in the request body is invalid. [PropertyName=vmSize; PropertyValue={typo}; "
        f"Reason=The specified vmSize '{typo}' is not a virtual machine size the Batch service supports.]; "
        f"vm_size '{typo}' is not a VM size Azure Batch supports (did you mean standard_nc4as_t4_v3?)"
    )
    [line] = [line for line in logs if refusal in line]
    assert step in line
    assert "BatchRequestRefusedError" in text
    assert {job.id for job in batch_client.list_jobs(select=["id"])} == jobs_before
    assert {pool.id for pool in batch_client.list_pools(select=["id"])} == pools_before
