"""The system tests' teardown runs when the job fails, and the watcher then fails the DAG run (which the
succeeding teardown alone would have left green)."""

from __future__ import annotations

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
