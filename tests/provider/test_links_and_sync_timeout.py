"""The "Azure Batch job" extra link, and execution_timeout in the synchronous path."""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG
from azure.batch import models as m

from airflow_provider_azbatch.links.job import AzureBatchJobLink
from airflow_provider_azbatch.operators.job import AzureBatchJobOperator
from tests.airflow_helpers import azbatch_connection_json, run_dag

START = datetime(2026, 1, 1)


def _link(run, task_id: str) -> str:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        value = (
            session.query(XComModel.value)
            .filter_by(dag_id=run.dag_id, run_id=run.run_id, task_id=task_id, key=AzureBatchJobLink().xcom_key)
            .scalar()
        )
    return XComModel.deserialize_value(type("Row", (), {"value": value})())


def test_no_link_without_portal_details(airflow_db, azbatch_default, shared_pool):
    # A browser cannot open the job's REST URL (it needs the key): no link rather than a broken one.
    with DAG("link_api", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(task_id="job", pool_id=shared_pool, command="true", poll_interval=0.3)
    run, _logs = run_dag(dag)
    assert run.state == "success"
    assert _link(run, "job") == ""


def test_link_opens_the_portal_with_subscription_and_resource_group(
    airflow_db, local_batch_service, shared_pool, monkeypatch
):
    monkeypatch.setenv(
        "AIRFLOW_CONN_AZBATCH_DEFAULT",
        azbatch_connection_json(local_batch_service, subscription_id="sub-1", resource_group="rg-batch", cloud="china"),
    )
    with DAG("link_portal", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(task_id="job", pool_id=shared_pool, command="true", poll_interval=0.3)
    run, logs = run_dag(dag)
    job_id = next(line.split()[3] for line in logs if line.startswith("Submitting Batch job"))
    assert _link(run, "job") == (
        "https://portal.azure.cn/#resource/subscriptions/sub-1/resourceGroups/rg-batch/providers/Microsoft.Batch/"
        f"batchAccounts/devbatchaccount1/jobs/{job_id}"
    )


def test_sync_execution_timeout_terminates_the_job(airflow_db, azbatch_default, shared_pool, batch_client):
    with DAG("sync_timeout", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(
            task_id="slow",
            pool_id=shared_pool,
            command="echo started; sleep 120",
            poll_interval=0.3,
            execution_timeout=timedelta(seconds=4),
        )
    run, logs = run_dag(dag)
    assert run.state == "failed"
    job_id = next(line.split()[3] for line in logs if line.startswith("Submitting Batch job"))
    text = "\n".join(logs)
    assert f"Batch job {job_id} did not finish within execution_timeout (0:00:04); the Batch job was terminated" in text
    job = batch_client.get_job(job_id)
    assert job.state == m.BatchJobState.COMPLETED
    assert job.execution_info.termination_reason == "AirflowExecutionTimeout"
