"""Run the code you just edited: a local directory every task gets as workspace/ (docs/howto/workspaces.md)."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_provider_azbatch.operators.job import AzureBatchJobOperator
from airflow_provider_azbatch.pools import BatchPool
from airflow_provider_azbatch.workspace import Workspace

CPU_POOL = BatchPool.shared("cpu", requirements={"cpus": 2})

with DAG(dag_id="docs_workspaces", start_date=datetime(2026, 1, 1), schedule=None) as dag:
    # [START howto_workspace]
    AzureBatchJobOperator(
        task_id="train",
        batch_pool=CPU_POOL,
        workspace="training_code",
        command="python3 workspace/train.py --epochs 20",
    )
    # [END howto_workspace]

    # [START howto_workspace_object]
    AzureBatchJobOperator(
        task_id="train_big",
        batch_pool=CPU_POOL,
        workspace=Workspace("training_code", ignore=["data/", "*.ckpt"], max_mb=250),
        command="python3 workspace/train.py --epochs 20",
    )
    # [END howto_workspace_object]
