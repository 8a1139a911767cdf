"""A scheduled training pipeline on Azure Batch: prepare data, train on 2 GPU nodes, evaluate.

- ``stage_code`` uploads the scripts in ``azbatch_training/`` to Blob under the run's own path: tasks
  download the code of this DAG run, so editing a script needs no new container image and runs in
  parallel do not see each other's code.
- ``prepare`` fans out one task per shard on a shared CPU pool (created from requirements if missing,
  autoscaled from zero) and uploads the shards to the ``datasets`` container.
- ``train`` runs in a container image on a pool made for the job from GPU requirements (deleted with
  it) as one 2-node task: every node runs the coordination command, then the primary trains and the
  model goes to the ``models`` container.
- ``evaluate`` downloads the model from Blob and reports its error.

Every task's stdout/stderr is streamed into the Airflow log and uploaded next to the outputs.
Offline, point ``azbatch_default`` at the local Batch service with Azurite as its storage account;
on Azure, at a Batch account and its storage account (and a GPU quota).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from airflow.sdk import DAG, task

from airflow_provider_azbatch.operators.job import AzureBatchJobOperator
from airflow_provider_azbatch.pools import BatchPool

CODE = Path(__file__).parent / "azbatch_training"
# Blob paths of this run (run ids hold ':' and '+', which make awkward blob names).
RUN = "{{ run_id | replace(':', '') | replace('+', '') }}"
CODE_INPUT = {"container": "code", "prefix": f"training/{RUN}/", "path": "code"}
# Where the staged scripts land in a task's working directory (resource files keep the blob name).
CODE_DIR = f"code/training/{RUN}"
CPU_POOL = BatchPool.shared("azbatch-training-cpu", requirements={"cpus": 1, "memory": "2Gi"}, max_nodes=2)
SHARDS = 4

with DAG(
    dag_id="example_azbatch_training",
    description="Prepare data, train on a 2-node GPU pool from requirements, evaluate; data and models in Blob",
    start_date=datetime(2026, 1, 1),
    schedule="@daily",
    catchup=False,
    tags=["azure-batch", "example", "training"],
) as dag:

    @task
    def stage_code(run: str) -> list[str]:
        from airflow_provider_azbatch.hooks.batch import AzureBatchHook

        storage = AzureBatchHook().blob_storage("Staging the training code")
        storage.ensure_container("code")
        staged = []
        with storage.service_client() as service:
            container = service.get_container_client("code")
            for script in sorted(CODE.glob("*.py")):
                container.upload_blob(f"training/{run}/{script.name}", script.read_bytes(), overwrite=True)
                staged.append(script.name)
        return staged

    prepare = AzureBatchJobOperator(
        task_id="prepare",
        batch_pool=CPU_POOL,
        command_template=f"python3 {CODE_DIR}/prepare.py --shard {{value}} --shards {SHARDS} --out shards",
        parameters=list(range(SHARDS)),
        task_id_prefix="shard",
        inputs=[CODE_INPUT],
        outputs=[{"pattern": "shards/*.csv", "path": f"prepared/{RUN}"}],
        output_container="datasets",
        poll_interval=1,
    )

    train = AzureBatchJobOperator(
        task_id="train",
        batch_pool=BatchPool.auto(requirements={"gpus": 4, "gpu_kind": "A100", "memory": "64Gi"}, max_nodes=2),
        image="mcr.microsoft.com/azureml/openmpi4.1.0-cuda11.8-cudnn8-ubuntu22.04:latest",
        num_nodes=2,
        coordination_command=(
            'echo "node ready: master=$AZ_BATCH_MASTER_NODE hosts=$AZ_BATCH_HOST_LIST '
            'is_master=$AZ_BATCH_IS_CURRENT_NODE_MASTER"'
        ),
        command=f"python3 {CODE_DIR}/train.py --data data --model-dir model --epochs 20",
        inputs=[CODE_INPUT, {"container": "datasets", "prefix": f"prepared/{RUN}/", "path": "data"}],
        outputs=[{"pattern": "model/*", "path": f"runs/{RUN}"}],
        output_container="models",
        max_wall_clock=4 * 3600,
        poll_interval=1,
    )

    evaluate = AzureBatchJobOperator(
        task_id="evaluate",
        batch_pool=CPU_POOL,
        command=f"python3 {CODE_DIR}/evaluate.py --models models",
        inputs=[CODE_INPUT, {"container": "models", "prefix": f"runs/{RUN}/", "path": "models"}],
        output_container="models",
        poll_interval=1,
    )

    stage_code(RUN) >> prepare >> train >> evaluate
