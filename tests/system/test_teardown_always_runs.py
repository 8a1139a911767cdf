"""The system tests' teardown runs when the job fails, and the watcher then fails the DAG run (which the
succeeding teardown alone would have left green)."""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG

from airflow_provider_azbatch.hooks.batch import AzureBatchHook
from airflow_provider_azbatch.operators.job import AzureBatchJobOperator
from airflow_provider_azbatch.pools import BatchPool
from tests.airflow_helpers import run_dag
from tests.system.azbatch_system import delete_run_resources, gone, resource_name, watcher


def test_a_failed_job_is_torn_down_and_fails_the_run(airflow_db, azbatch_default):
    pool_id = resource_name("fails")
    with DAG("system_test_that_fails", schedule=None, start_date=datetime(2026, 1, 1)) as dag:
        fails = AzureBatchJobOperator(
            task_id="fails",
            batch_pool=BatchPool.shared(pool_id, requirements={"cpus": 1}, max_nodes=1, autoscale=False),
            command="echo 'no model' >&2; exit 3",
            poll_interval=0.5,
        )
        fails >> delete_run_resources([pool_id])
        list(dag.tasks) >> watcher()
    run, _ = run_dag(dag)
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states == {"fails": "failed", "delete_run_resources": "success", "watcher": "failed"}
    assert run.state == "failed"
    deleted = run.get_task_instance("delete_run_resources").xcom_pull(task_ids="delete_run_resources")
    assert deleted["pools"] == [pool_id]
    (job_id,) = deleted["jobs"]
    hook = AzureBatchHook()
    assert gone(hook.get_job(job_id, select=["state"]))
    assert gone(hook.get_pool(pool_id, select=["state"]))


def test_the_account_the_variable_names_is_the_one_the_dags_run_on(
    airflow_db, local_batch_service, request, monkeypatch
):
    """The real-account case reads its connection from AZBATCH_SYSTEM_TEST_CONN alone: here the local service stands
    in for the account (with no storage account, which the hello DAG does not need)."""
    from tests.airflow_helpers import azbatch_connection_json
    from tests.system import conftest, example_azbatch_system_hello

    connection = azbatch_connection_json(local_batch_service)
    monkeypatch.setenv(conftest.CONN_VARIABLE, connection)
    conftest.use_target("azure", request, monkeypatch)
    assert os.environ["AIRFLOW_CONN_AZBATCH_DEFAULT"] == connection
    example_azbatch_system_hello.test_run("azure")
