"""Inputs from and outputs to Blob storage (docs/howto/blob.md)."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_provider_azbatch.operators.job import AzureBatchJobOperator

with DAG(dag_id="docs_blob_io", start_date=datetime(2026, 1, 1), schedule=None) as dag:
    # [START howto_blob_io]
    AzureBatchJobOperator(
        task_id="train",
        pool_id="gpu-pool",
        command="python train.py --data data --vocab vocab.txt --out model",
        inputs=[
            {"container": "datasets", "prefix": "train/", "path": "data"},  # -> wd/data/train/...
            {"url": "https://example.org/vocab.txt", "path": "vocab.txt"},
        ],
        outputs=[{"pattern": "model/**", "path": "runs/{{ ds_nodash }}"}],  # upload on success
        output_container="models",
    )
    # [END howto_blob_io]
