"""A user's own DAG, as `azbatch-dev` runs it from their DAGs folder: a Python function on Batch
(@task.azure_batch, deferred), a two-node task, and an output uploaded to Blob."""

from __future__ import annotations

# [START howto_local_development_dag]
from datetime import datetime

from airflow.sdk import DAG, task

from airflow_provider_azbatch.operators.job import AzureBatchJobOperator
from airflow_provider_azbatch.pools import BatchPool

POOL = BatchPool.shared("devenv-check", requirements={"cpus": 1}, max_nodes=1, autoscale=False)
# Multi-node tasks need a pool of their own (inter-node communication on, one task per node).
TWO_NODE_POOL = BatchPool.shared("devenv-two-nodes", requirements={"cpus": 1}, max_nodes=2, autoscale=False)

with DAG("my_pipeline", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:

    @task.azure_batch(batch_pool=POOL, deferrable=True, poll_interval=0.5)
    def score() -> float:
        for step in range(1, 6):
            print(f"devenv score step {step}/5", flush=True)
        return 0.9

    two_nodes = AzureBatchJobOperator(
        task_id="two_nodes",
        batch_pool=TWO_NODE_POOL,
        num_nodes=2,
        coordination_command="/bin/sh -c 'echo devenv coordination on $AZ_BATCH_NODE_ID'",
        command=(
            "/bin/sh -c 'mkdir -p out && for i in 1 2 3 4; do echo devenv two-node line $i; done"
            " && echo model-of-$AZ_BATCH_JOB_ID > out/model.txt'"
        ),
        outputs=[{"pattern": "out/*", "path": "runs/{{ run_id | replace(':', '') | replace('+', '') }}"}],
        output_container="devenv-results",
        poll_interval=0.5,
    )

    score() >> two_nodes
# [END howto_local_development_dag]
