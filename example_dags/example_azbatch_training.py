"""A scheduled training pipeline on Azure Batch: prepare data, train on 2 GPU nodes, evaluate.

- Every task gets the scripts of ``azbatch_training/`` (next to this file) as ``workspace/``: the
  operator packs the directory, stages it in Blob under its content hash (once: unchanged code is not
  uploaded again) and unpacks it before each task's command. Editing a script needs no new container
  image; runs in parallel each get the code they were started with.
- ``prepare`` fans out one task per shard on a shared CPU pool (created from requirements if missing,
  autoscaled from zero) and uploads the shards to the ``datasets`` container.
- ``train`` runs in a container image on a pool made for the job from GPU requirements (deleted with
  it) as one 2-node task: every node runs the coordination command, then the primary trains and the
  model goes to the ``models`` container.
- ``evaluate`` is a Python function run on the CPU pool (``@task.azure_batch``): it gets the model from
  Blob, imports the evaluation code from the workspace and returns the model's metrics, which come back as
  XCom; ``promote_or_hold`` branches on them.

Every task's stdout/stderr is streamed into the Airflow log and uploaded next to the outputs.
Offline, point ``azbatch_default`` at the local Batch service with Azurite as its storage account;
on Azure, at a Batch account and its storage account (and a GPU quota).
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, task

from airflow_provider_azbatch.operators.job import AzureBatchJobOperator
from airflow_provider_azbatch.pools import BatchPool

# [START tutorial_training_setup]
# The code every task gets as workspace/ (the path is taken from this file's directory).
CODE = "azbatch_training"
# Blob paths of this run (run ids hold ':' and '+', which make awkward blob names).
RUN = "{{ run_id | replace(':', '') | replace('+', '') }}"
CPU_POOL = BatchPool.shared("azbatch-training-cpu", requirements={"cpus": 1, "memory": "2Gi"}, max_nodes=2)
SHARDS = 4
# A model whose mean absolute error on fresh points is above this is not promoted.
MAX_MAE = 1.0
# [END tutorial_training_setup]

# [START tutorial_training_dag]
with DAG(
    dag_id="example_azbatch_training",
    description="Prepare data, train on a 2-node GPU pool from requirements, evaluate; data and models in Blob",
    start_date=datetime(2026, 1, 1),
    schedule="@daily",
    catchup=False,
    tags=["azure-batch", "example", "training"],
) as dag:
    # [END tutorial_training_dag]
    # [START tutorial_training_prepare]
    prepare = AzureBatchJobOperator(
        task_id="prepare",
        batch_pool=CPU_POOL,
        workspace=CODE,
        command_template=f"python3 workspace/prepare.py --shard {{value}} --shards {SHARDS} --out shards",
        parameters=list(range(SHARDS)),
        task_id_prefix="shard",
        outputs=[{"pattern": "shards/*.csv", "path": f"prepared/{RUN}"}],
        output_container="datasets",
        poll_interval=1,
    )
    # [END tutorial_training_prepare]

    # [START tutorial_training_train]
    train = AzureBatchJobOperator(
        task_id="train",
        batch_pool=BatchPool.auto(requirements={"gpus": 4, "gpu_kind": "A100", "memory": "64Gi"}, max_nodes=2),
        image="mcr.microsoft.com/azureml/openmpi4.1.0-cuda11.8-cudnn8-ubuntu22.04:latest",
        num_nodes=2,
        coordination_command=(
            'echo "node ready: master=$AZ_BATCH_MASTER_NODE hosts=$AZ_BATCH_HOST_LIST '
            'is_master=$AZ_BATCH_IS_CURRENT_NODE_MASTER"'
        ),
        workspace=CODE,
        command="python3 workspace/train.py --data data --model-dir model --epochs 20",
        inputs=[{"container": "datasets", "prefix": f"prepared/{RUN}/", "path": "data"}],
        outputs=[{"pattern": "model/*", "path": f"runs/{RUN}"}],
        output_container="models",
        max_wall_clock=4 * 3600,
        poll_interval=1,
    )
    # [END tutorial_training_train]

    # [START tutorial_training_evaluate]
    @task.azure_batch(
        batch_pool=CPU_POOL,
        workspace=CODE,
        inputs=[{"container": "models", "prefix": f"runs/{RUN}/", "path": "models"}],
        output_container="models",
        poll_interval=1,
    )
    def evaluate() -> dict:
        import evaluate  # workspace/evaluate.py: the workspace is importable

        return evaluate.evaluate("models")

    # [END tutorial_training_evaluate]

    # [START tutorial_training_branch]
    @task.branch
    def promote_or_hold(metrics: dict) -> str:
        return "promote" if metrics["mae"] <= MAX_MAE else "hold"

    @task
    def promote(metrics: dict) -> str:
        return f"promoted the model of {RUN}: mean absolute error {metrics['mae']}"

    @task
    def hold(metrics: dict) -> str:
        return f"kept the current model: this one's mean absolute error {metrics['mae']} is over {MAX_MAE}"

    # [END tutorial_training_branch]

    # [START tutorial_training_flow]
    metrics = evaluate()
    prepare >> train >> metrics
    promote_or_hold(metrics) >> [promote(metrics), hold(metrics)]
    # [END tutorial_training_flow]
