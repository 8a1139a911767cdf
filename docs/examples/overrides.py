"""Batch REST fields the provider does not model, merged over what it builds (docs/howto/overrides.md)."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_provider_azbatch.operators.job import AzureBatchJobOperator
from airflow_provider_azbatch.pools import BatchPool

with DAG(dag_id="docs_overrides", start_date=datetime(2026, 1, 1), schedule=None, params={"retries": 3}) as dag:
    # [START howto_overrides]
    from azure.batch import models

    AzureBatchJobOperator(
        task_id="train",
        pool_id="gpu-pool",
        tasks=[
            {"id": "prepare", "command_line": "python prepare.py"},
            {
                "id": "train",
                "command_line": "python train.py",
                "depends_on": ["prepare"],
                "overrides": {"containerSettings": {"containerHostBatchBindMounts": [{"source": "Shared"}]}},
            },
        ],
        job_overrides={"allowTaskPreemption": True, "constraints": {"maxTaskRetryCount": "{{ params.retries }}"}},
        task_overrides=models.BatchTaskCreateOptions(constraints=models.BatchTaskConstraints(retention_time="P1D")),
    )
    BatchPool.auto({"cpus": 4}, pool_overrides={"resizeTimeout": "PT30M", "upgradePolicy": {"mode": "manual"}})
    # [END howto_overrides]
