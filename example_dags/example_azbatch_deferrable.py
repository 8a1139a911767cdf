"""A long Batch job waited for in the triggerer, with its output streamed while the task is deferred.

The Airflow task submits the job and hands the wait to ``AzureBatchJobTrigger`` (no worker slot is
held). Task output appears in the task's log in the UI while it is deferred; when the job ends the
task resumes, prints anything not yet shown, and returns the per-task results. If the task is retried,
it reattaches to the job instead of submitting another; marking it failed terminates the job.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG, task

from airflow_provider_azbatch.operators.job import AzureBatchJobOperator

POOL_ID = "azbatch-demo"

# A stand-in for a training run: a numbered progress line every quarter second.
TRAIN = 'for step in $(seq 1 {steps}); do echo "step $step/{steps} loss $((1000 / step))"; sleep 0.25; done'

with DAG(
    dag_id="example_azbatch_deferrable",
    description="Wait for a Batch job in the triggerer while its output streams into the task log",
    start_date=datetime(2026, 1, 1),
    schedule=None,
    catchup=False,
    params={"steps": 80},
    tags=["azure-batch", "example", "deferrable"],
) as dag:

    @task
    def ensure_pool() -> str:
        from azure.batch import models

        from airflow_provider_azbatch.hooks.batch import AzureBatchHook

        AzureBatchHook().create_pool_if_missing(
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
        return POOL_ID

    train = AzureBatchJobOperator(
        task_id="train",
        pool_id=POOL_ID,
        tasks=[{"id": "train", "command_line": TRAIN.replace("{steps}", "{{ params.steps }}")}],
        deferrable=True,
        poll_interval=1,
        retries=1,
        execution_timeout=timedelta(hours=2),
        on_finish_action="delete_succeeded_job",
    )

    ensure_pool() >> train
