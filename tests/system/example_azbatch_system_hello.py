"""System test: the hello job. Three Batch tasks on a pool of this run, their output in the log, their results
in XCom; the teardown deletes the job and the pool."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, task

from airflow_provider_azbatch.operators.job import AzureBatchJobOperator
from airflow_provider_azbatch.pools import BatchPool
from tests.system.azbatch_system import delete_run_resources, get_test_run, resource_name, watcher

DAG_ID = "example_azbatch_system_hello"
# [START system_hello_pool]
POOL_ID = resource_name("hello")
# Two fixed nodes of the cheapest size with a vCPU, gone with the teardown.
POOL = BatchPool.shared(POOL_ID, requirements={"cpus": 1}, max_nodes=2, autoscale=False, task_slots_per_node=2)
# [END system_hello_pool]

with DAG(dag_id=DAG_ID, schedule=None, start_date=datetime(2026, 1, 1), catchup=False, tags=["system-test"]) as dag:
    # [START system_hello_job]
    hello = AzureBatchJobOperator(
        task_id="hello",
        batch_pool=POOL,
        tasks=[
            {"id": f"shard-{n}", "command_line": f'echo "shard {n} on $AZ_BATCH_NODE_ID"; echo "shard {n} done" >&2'}
            for n in range(1, 4)
        ],
        poll_interval=2,
    )
    # [END system_hello_job]

    @task
    def check_result(result: dict) -> None:
        outcomes = {task_id: (outcome["exit_code"], outcome["result"]) for task_id, outcome in result["tasks"].items()}
        assert outcomes == {f"shard-{n}": (0, "success") for n in range(1, 4)}, outcomes

    checked = check_result(hello.output)
    checked >> delete_run_resources([POOL_ID])
    list(dag.tasks) >> watcher()


def check(run, logs: list[str]) -> None:  # type: ignore[no-untyped-def]
    for n in range(1, 4):
        assert any(line.startswith(f"[shard-{n}] shard {n} on ") for line in logs), n
        assert f"[shard-{n}:stderr] shard {n} done" in logs, n


test_run = get_test_run(dag, check)
