"""A DAG whose Batch task runs for minutes: the kill tests start it and kill the Airflow task."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_provider_azbatch.operators.job import AzureBatchJobOperator

with DAG("azbatch_long_job", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
    AzureBatchJobOperator(
        task_id="run_long",
        pool_id="shared",
        tasks=[{"id": "sleeper", "command_line": "echo started; sleep 600"}],
        poll_interval=0.5,
    )
