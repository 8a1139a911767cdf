"""The operator: a job of two dependent tasks on an existing pool (docs/howto/operator.md)."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

# [START howto_operator_import]
from airflow_provider_azbatch.operators.job import AzureBatchJobOperator

# [END howto_operator_import]

with DAG(dag_id="docs_operator", start_date=datetime(2026, 1, 1), schedule=None) as dag:
    # [START howto_operator]
    train = AzureBatchJobOperator(
        task_id="train",
        pool_id="gpu-pool",
        tasks=[
            {"id": "prepare", "command_line": "python prepare.py"},
            {
                "id": "train",
                "command_line": "python train.py",
                "depends_on": ["prepare"],
                "max_retries": 2,
                "max_wall_clock": 3600,
                "environment": {"EPOCHS": "10"},
            },
        ],
        environment={"RUN_ID": "{{ run_id }}"},
    )
    # [END howto_operator]

    # [START howto_operator_mapped]
    scores = AzureBatchJobOperator.partial(task_id="score", pool_id="cpu-pool").expand(
        command=[f"python score.py --part {n}" for n in range(4)]
    )
    # [END howto_operator_mapped]
