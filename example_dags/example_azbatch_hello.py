"""A small Azure Batch pipeline: make sure a pool exists, run three tasks on it, report their results.

Runs as is against the local Batch service (``make demo`` points the ``azbatch_default``
connection at it) and against a real Batch account by changing only that connection.
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, task

from airflow_provider_azbatch.operators.job import AzureBatchJobOperator

POOL_ID = "azbatch-demo"

with DAG(
    dag_id="example_azbatch_hello",
    description="Run a few Batch tasks and stream their output into the Airflow log",
    start_date=datetime(2026, 1, 1),
    schedule=None,
    catchup=False,
    tags=["azure-batch", "example"],
) as dag:

    @task
    def ensure_pool() -> str:
        from azure.batch import models

        from airflow_provider_azbatch.hooks.batch import AzureBatchHook

        hook = AzureBatchHook()
        created = hook.create_pool_if_missing(
            models.BatchPoolCreateOptions(
                id=POOL_ID,
                vm_size="standard_d2s_v3",
                virtual_machine_configuration=models.VirtualMachineConfiguration(
                    image_reference=models.BatchVmImageReference(
                        publisher="canonical", offer="0001-com-ubuntu-server-jammy", sku="22_04-lts"
                    ),
                    node_agent_sku_id="batch.node.ubuntu 22.04",
                ),
                target_dedicated_nodes=2,
                task_slots_per_node=2,
            )
        )
        print(f"pool {POOL_ID}: {'created' if created else 'already there'}")
        return POOL_ID

    shards = AzureBatchJobOperator(
        task_id="process_shards",
        pool_id=POOL_ID,
        tasks=[
            {
                "id": f"shard-{n}",
                "command_line": (
                    f'for i in 1 2 3 4 5; do echo "shard {n}: processed record $i on $AZ_BATCH_NODE_ID"; '
                    'sleep 0.3; done; echo "shard {n}: done" >&2'
                ).replace("{n}", str(n)),
                "environment": {"SHARD": str(n)},
            }
            for n in range(1, 4)
        ],
        environment={"PIPELINE": "example_azbatch_hello"},
        poll_interval=1,
    )

    @task
    def report(results: dict) -> None:
        for task_id, outcome in sorted(results["tasks"].items()):
            print(f"{task_id}: exit code {outcome['exit_code']} ({outcome['result']})")

    ensure_pool() >> shards
    report(shards.output)
