"""System test: ``@task.azure_batch``. A Python function runs on a node of this run's pool, its argument in and
its return value back as XCom (through the connection's storage account); the teardown deletes the job and the
pool."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, task

from airflow_provider_azbatch.pools import BatchPool
from tests.system.azbatch_system import delete_run_resources, get_test_run, resource_name, watcher

DAG_ID = "example_azbatch_system_decorator"
POOL_ID = resource_name("function")

with DAG(dag_id=DAG_ID, schedule=None, start_date=datetime(2026, 1, 1), catchup=False, tags=["system-test"]) as dag:

    @task.azure_batch(
        batch_pool=BatchPool.shared(POOL_ID, requirements={"cpus": 1}, max_nodes=1, autoscale=False),
        poll_interval=2,
    )
    def mean_of(values: list[float]) -> dict:
        import os
        import statistics

        print(f"averaging {len(values)} values on {os.environ['AZ_BATCH_NODE_ID']}")
        return {"mean": statistics.fmean(values), "node": os.environ["AZ_BATCH_NODE_ID"]}

    @task
    def check_result(result: dict) -> None:
        assert result["mean"] == 2.5, result
        assert result["node"], result

    checked = check_result(mean_of([1.0, 2.0, 3.0, 4.0]))
    checked >> delete_run_resources([POOL_ID])
    list(dag.tasks) >> watcher()


def check(run, logs: list[str]) -> None:  # type: ignore[no-untyped-def]
    assert any(line.startswith("[main] averaging 4 values on ") for line in logs), logs[-40:]
    assert run.get_task_instance("mean_of").xcom_pull(task_ids="mean_of")["mean"] == 2.5


test_run = get_test_run(dag, check)
