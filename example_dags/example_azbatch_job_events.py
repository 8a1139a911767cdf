"""An evaluation DAG that runs whenever a TorchX training job succeeds on Azure Batch, wherever it was started from.

``torchx run -s azure_batch ...`` submits a Batch job named ``torchx-<app>-<suffix>`` with the app's name in its
metadata (``torchx-app``). An asset watcher fires when such a job of the app ``train`` completes and every one of
its tasks succeeded; the asset's event starts this DAG, carrying the job's id, outcome, exit codes and metadata.
Each job starts one run, also across triggerer restarts (docs/howto/job-events.md).
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, Asset, AssetWatcher, task

from airflow_provider_azbatch.triggers.job_events import AzureBatchJobCompletedTrigger

# [START howto_job_events]
TRAINED_MODEL = Asset(
    "azbatch_trained_model",
    watchers=[
        AssetWatcher(
            name="torchx_training_succeeded",
            trigger=AzureBatchJobCompletedTrigger(
                conn_id="azbatch_default",
                job_id_prefix="torchx-",
                metadata={"torchx-app": "train"},
                outcome="succeeded",
                poll_interval=5,
            ),
        )
    ],
)

with DAG(
    dag_id="example_azbatch_job_events",
    description="Evaluate the model of each TorchX training job that succeeded on Azure Batch",
    start_date=datetime(2026, 1, 1),
    schedule=[TRAINED_MODEL],
    catchup=False,
):

    @task
    def evaluate(triggering_asset_events=None) -> list[dict]:
        jobs = [event.extra["payload"] for events in triggering_asset_events.values() for event in events]
        for job in jobs:
            print(f"Evaluating the model of Batch job {job['job_id']} (exit codes {job['exit_codes']})")
        return jobs

    evaluate()
# [END howto_job_events]
