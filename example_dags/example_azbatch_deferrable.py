"""A long Batch job waited for in the triggerer, with its output streamed while the task is deferred.

The Airflow task submits the job and hands the wait to ``AzureBatchJobTrigger`` (no worker slot is
held). Task output appears in the task's log in the UI while it is deferred; when the job ends the
task resumes, prints anything not yet shown, and returns the per-task results. If the task is retried,
it reattaches to the job instead of submitting another; marking it failed terminates the job.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_provider_azbatch.operators.job import AzureBatchJobOperator
from airflow_provider_azbatch.pools import BatchPool

DEMO_POOL = BatchPool.shared(
    "azbatch-demo", requirements={"cpus": 1}, max_nodes=2, autoscale=False, task_slots_per_node=2
)

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
    # [START howto_deferrable_operator]
    train = AzureBatchJobOperator(
        task_id="train",
        batch_pool=DEMO_POOL,
        tasks=[{"id": "train", "command_line": TRAIN.replace("{steps}", "{{ params.steps }}")}],
        deferrable=True,
        poll_interval=1,
        retries=1,
        execution_timeout=timedelta(hours=2),
        on_finish_action="delete_succeeded_job",
    )
    # [END howto_deferrable_operator]
