"""The DAG the preflight tests check: a Python function on Batch (@task.azure_batch stages its call in Blob, so the
connection needs a storage account), a command on an existing pool, and a mapped fan-out on a shared pool."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, task

from airflow_provider_azbatch.operators.job import AzureBatchJobOperator
from airflow_provider_azbatch.pools import BatchPool

CPU = BatchPool.shared("preflight-cpu", requirements={"cpus": 2}, max_nodes=3)

with DAG("preflight_scoring", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:

    @task.azure_batch(batch_pool=CPU)
    def score(part: int) -> int:
        return part * 2

    AzureBatchJobOperator(task_id="report", pool_id="preflight-existing", command="/bin/sh -c 'echo report'")
    AzureBatchJobOperator.partial(task_id="shards", batch_pool=CPU).expand(command=["echo 1", "echo 2"])
    score(1)
