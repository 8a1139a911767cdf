"""What a job does when its tasks fail (docs/howto/when-tasks-fail.md)."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_provider_azbatch.operators.job import AzureBatchJobOperator

with DAG(dag_id="docs_when_tasks_fail", start_date=datetime(2026, 1, 1), schedule=None) as dag:
    # [START howto_when_tasks_fail]
    AzureBatchJobOperator(
        task_id="nightly",
        pool_id="cpu-pool",
        fail_fast=True,
        skip_on_exit_code=99,  # "no new data today"
        job_preparation={"command": "python3 workspace/fetch_dataset.py", "max_retries": 2},
        job_release="rm -rf $AZ_BATCH_NODE_SHARED_DIR/dataset",
        workspace="code",
        tasks=[
            {
                "id": "ingest",
                "command_line": "python3 workspace/ingest.py",
                # 3: partial input, good enough for the report; 10-19: retryable upstream errors end the job.
                "exit_conditions": {
                    "exit_codes": {3: {"dependency_action": "satisfy"}},
                    "exit_code_ranges": [{"start": 10, "end": 19, "job_action": "terminate"}],
                },
            },
            {"id": "report", "command_line": "python3 workspace/report.py", "depends_on": ["ingest"]},
        ],
    )
    # [END howto_when_tasks_fail]
