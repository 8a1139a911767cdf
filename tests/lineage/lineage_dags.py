"""The DAGs tests/lineage runs: a job with Blob inputs and outputs that writes a result file, and one that fails.

The Batch task writes what the OpenLineage parent run variables held into its result file, so that the tests can
compare them with the events.
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, Asset

from airflow_provider_azbatch.operators.job import AzureBatchJobOperator

START = datetime(2026, 1, 1)
MODEL = Asset("lineage_test_model")
TRAINING = (
    "set -e; cat in/data/a.txt; mkdir -p model; echo weights > model/weights.bin; echo cfg > model/config.json; "
    'printf \'{"auc": 0.93, "parent_id": "%s", "context": %s}\' '
    '"${OPENLINEAGE_PARENT_ID-unset}" "${OPENLINEAGE_CONTEXT-null}" > result.json'
)


def training(pool_id: str) -> DAG:
    with DAG("lineage_training", schedule=None, start_date=START) as dag:
        # [START howto_lineage]
        AzureBatchJobOperator(
            task_id="train",
            pool_id=pool_id,
            command=TRAINING,
            inputs=[{"container": "lineage-in", "prefix": "data/", "path": "in"}],
            outputs=[{"pattern": "model/*", "path": "runs/{{ run_id | replace(':', '_') }}", "asset": MODEL}],
            output_container="lineage-out",
            result_file="result.json",
            poll_interval=0.3,
        )
        # [END howto_lineage]
    return dag


def failing(pool_id: str) -> DAG:
    with DAG("lineage_failing", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(
            task_id="train",
            pool_id=pool_id,
            command="cat in/data/a.txt; echo 'loss is nan' >&2; exit 3",
            inputs=[{"container": "lineage-in", "prefix": "data/", "path": "in"}],
            outputs=[{"pattern": "model/*", "path": "failed"}],
            output_container="lineage-out",
            poll_interval=0.3,
        )
    return dag


def torchx_app(pool_id: str) -> DAG:
    from airflow_provider_azbatch.operators.torchx import AzureBatchTorchXOperator

    with DAG("lineage_torchx", schedule=None, start_date=START) as dag:
        AzureBatchTorchXOperator(
            task_id="train",
            component="utils.sh",
            component_args=["sh", "-c", "cat in/data/a.txt"],
            # The app's image needs a pool made for containers.
            app_options={"shared_pool": "lineage-torchx-pool", "max_nodes": 1, "autoscale": False},
            inputs=[{"container": "lineage-in", "prefix": "data/", "path": "in"}],
            output_container="lineage-out",
            poll_interval=0.3,
        )
    return dag


DAGS = {"lineage_training": training, "lineage_failing": failing, "lineage_torchx": torchx_app}
