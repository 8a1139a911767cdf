"""A DAG that needs no storage account: a command line on Batch, its output in the task log."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_provider_azbatch.operators.job import AzureBatchJobOperator
from airflow_provider_azbatch.pools import BatchPool

with DAG("hello_batch", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
    AzureBatchJobOperator(
        task_id="hello",
        batch_pool=BatchPool.shared("devenv-hello", requirements={"cpus": 1}, max_nodes=1, autoscale=False),
        command="/bin/sh -c 'echo hello from a local Batch node'",
        poll_interval=0.5,
    )
