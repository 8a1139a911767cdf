"""A small Azure Batch pipeline: run three tasks on a shared pool, report their results.

Runs as is against the local Batch service (``make demo`` points the ``azbatch_default``
connection at it) and against a real Batch account by changing only that connection.
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, task

from airflow_provider_azbatch.operators.job import AzureBatchJobOperator
from airflow_provider_azbatch.pools import BatchPool

# [START howto_hello_pool]
DEMO_POOL = BatchPool.shared(
    "azbatch-demo", requirements={"cpus": 1}, max_nodes=2, autoscale=False, task_slots_per_node=2
)
# [END howto_hello_pool]

with DAG(
    dag_id="example_azbatch_hello",
    description="Run a few Batch tasks and stream their output into the Airflow log",
    start_date=datetime(2026, 1, 1),
    schedule=None,
    catchup=False,
    tags=["azure-batch", "example"],
) as dag:
    # [START howto_hello_operator]
    shards = AzureBatchJobOperator(
        task_id="process_shards",
        # Created on first use (from what the tasks need), then shared by every run.
        batch_pool=DEMO_POOL,
        tasks=[
            {
                "id": f"shard-{n}",
                "command_line": (
                    f'for i in 1 2 3 4 5; do echo "shard {n}: processed record $i on $AZ_BATCH_NODE_ID"; '
                    f'sleep 0.3; done; echo "shard {n}: done" >&2'
                ),
                "environment": {"SHARD": str(n)},
            }
            for n in range(1, 4)
        ],
        environment={"PIPELINE": "example_azbatch_hello"},
        poll_interval=1,
    )
    # [END howto_hello_operator]

    # [START howto_hello_report]
    @task
    def report(results: dict) -> None:
        for task_id, outcome in sorted(results["tasks"].items()):
            print(f"{task_id}: exit code {outcome['exit_code']} ({outcome['result']})")

    report(shards.output)
    # [END howto_hello_report]
