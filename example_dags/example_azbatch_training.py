"""A scheduled training pipeline on Azure Batch: prepare data, train on 2 GPU nodes, evaluate.

- Every task gets the scripts of ``azbatch_training/`` (next to this file) as ``workspace/``: the
  operator packs the directory, stages it in Blob under its content hash (once: unchanged code is not
  uploaded again) and unpacks it before each task's command. Editing a script needs no new container
  image; runs in parallel each get the code they were started with.
- ``prepare`` fans out one task per shard on a shared CPU pool (created from requirements if missing,
  autoscaled from zero) and uploads the shards to the ``datasets`` container.
- ``train`` is a TorchX app (``AzureBatchTorchXOperator``): one role of 2 replicas in a container image, on a
  pool made for the job from the role's resources (GPUs; deleted with it), run as one 2-node task in which
  every replica gets its own ``$TORCHX_REPLICA_ID`` and the primary's address as ``$TORCHX_RANK0_HOST``;
  replica 0 trains and the model goes to the ``models`` container.
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
from torchx import specs

from airflow_provider_azbatch.operators.job import AzureBatchJobOperator
from airflow_provider_azbatch.operators.torchx import AzureBatchTorchXOperator
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
    # [START howto_torchx_operator]
    # One role, 2 replicas (one node each): the role's resources pick the pool's VM size. Every replica runs in
    # the workspace; inputs and outputs are the task's, in the primary's working directory.
    trainer = specs.Role(
        name="main",
        image="mcr.microsoft.com/azureml/openmpi4.1.0-cuda11.8-cudnn8-ubuntu22.04:latest",
        entrypoint="sh",
        args=[
            "-c",
            'echo "node ready: master=$AZ_BATCH_MASTER_NODE hosts=$AZ_BATCH_HOST_LIST replica=$TORCHX_REPLICA_ID '
            'rank0=$TORCHX_RANK0_HOST is_master=$AZ_BATCH_IS_CURRENT_NODE_MASTER"; '
            '[ "$TORCHX_REPLICA_ID" = 0 ] || exit 0; '
            'exec python3 train.py --data "$AZ_BATCH_TASK_WORKING_DIR/data" '
            '--model-dir "$AZ_BATCH_TASK_WORKING_DIR/model" --epochs 20',
        ],
        num_replicas=2,
        resource=specs.Resource(cpu=1, gpu=4, memMB=64 * 1024, capabilities={"gpu_kind": "A100"}),
    )
    train = AzureBatchTorchXOperator(
        task_id="train",
        app=specs.AppDef("train", roles=[trainer]),
        workspace=CODE,
        inputs=[{"container": "datasets", "prefix": f"prepared/{RUN}/", "path": "data"}],
        outputs=[{"pattern": "model/*", "path": f"runs/{RUN}"}],
        output_container="models",
        max_wall_clock=4 * 3600,
        poll_interval=1,
    )
    # [END howto_torchx_operator]
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

    # run_id comes from the task's context (a plain function's body is not a template, as RUN is).
    @task
    def promote(metrics: dict, run_id: str | None = None) -> str:
        return f"promoted the model of {run_id}: mean absolute error {metrics['mae']}"

    @task
    def hold(metrics: dict, run_id: str | None = None) -> str:
        return f"kept the current model: the mean absolute error of {run_id}'s, {metrics['mae']}, is over {MAX_MAE}"

    # [END tutorial_training_branch]

    # [START tutorial_training_flow]
    metrics = evaluate()
    prepare >> train >> metrics
    promote_or_hold(metrics) >> [promote(metrics), hold(metrics)]
    # [END tutorial_training_flow]
