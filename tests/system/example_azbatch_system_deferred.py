"""System test: a deferred job with live output. The trigger streams the task's lines into the log while the
Airflow task is deferred; each line appears once, in order; the teardown deletes the job and the pool."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_provider_azbatch.operators.job import AzureBatchJobOperator
from airflow_provider_azbatch.pools import BatchPool
from tests.system.azbatch_system import delete_run_resources, get_test_run, resource_name, watcher

DAG_ID = "example_azbatch_system_deferred"
POOL_ID = resource_name("deferred")
STEPS = 20

with DAG(dag_id=DAG_ID, schedule=None, start_date=datetime(2026, 1, 1), catchup=False, tags=["system-test"]) as dag:
    train = AzureBatchJobOperator(
        task_id="train",
        batch_pool=BatchPool.shared(POOL_ID, requirements={"cpus": 1}, max_nodes=1, autoscale=False),
        tasks=[
            {
                "id": "train",
                "command_line": f'for s in $(seq 1 {STEPS}); do echo "step $s/{STEPS}"; sleep 0.2; done',
            }
        ],
        deferrable=True,
        poll_interval=1,
    )
    train >> delete_run_resources([POOL_ID])
    list(dag.tasks) >> watcher()


def check(run, logs: list[str]) -> None:  # type: ignore[no-untyped-def]
    steps = [line for line in logs if line.startswith("[train] step ")]
    assert steps == [f"[train] step {s}/{STEPS}" for s in range(1, STEPS + 1)], steps
    # Streamed by the trigger while the task was deferred, not only when it resumed.
    deferred = logs.index("Pausing task as DEFERRED. ")
    resumed = logs.index("Task started", deferred)
    assert any(line.startswith("[train] step ") for line in logs[deferred:resumed]), logs[deferred:resumed]
    result = run.get_task_instance("train").xcom_pull(task_ids="train")
    assert result["tasks"]["train"]["exit_code"] == 0, result


test_run = get_test_run(dag, check)
