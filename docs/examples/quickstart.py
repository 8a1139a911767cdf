"""The README's example: a job on a pool made from requirements, waited for in the triggerer."""

from __future__ import annotations

# [START readme_example]
from datetime import datetime

from airflow.sdk import DAG

from airflow_provider_azbatch.operators.job import AzureBatchJobOperator
from airflow_provider_azbatch.pools import BatchPool

with DAG(dag_id="nightly_scoring", start_date=datetime(2026, 1, 1), schedule="@daily"):
    AzureBatchJobOperator(
        task_id="score",
        batch_pool=BatchPool.shared("cpu", requirements={"cpus": 4, "memory": "16Gi"}, max_nodes=10),
        command_template="python3 score.py --part {value}",
        parameters=range(100),
        deferrable=True,
    )
# [END readme_example]
