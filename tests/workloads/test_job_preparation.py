"""Job preparation and release tasks against the local Batch service and Azurite: the workspace and Blob
inputs reach the preparation task, the job's tasks use what it prepared on their node, the release task
cleans up after the job, and a failing release task is a warning quoting its stderr."""

from __future__ import annotations

import re
from datetime import datetime

import pytest
from airflow.sdk import DAG
from azure.storage.blob import BlobServiceClient

from airflow_provider_azbatch.operators.job import AzureBatchJobOperator
from airflow_provider_azbatch.workspace import Workspace
from tests.airflow_helpers import run_dag

pytestmark = pytest.mark.azurite
START = datetime(2026, 1, 1)


def test_preparation_prepares_each_node_once_and_release_cleans_up(
    airflow_db, azbatch_with_storage, azurite, shared_pool, batch_client, tmp_path
):
    blobs = BlobServiceClient.from_connection_string(azurite.connection_string)
    container = blobs.get_container_client("prep-seeds")
    if not container.exists():
        container.create_container()
    container.upload_blob("seed.txt", b"seed 7\n", overwrite=True)
    code = tmp_path / "code"
    code.mkdir()
    (code / "fetch.py").write_text(
        "import os, pathlib\n"
        "seed = pathlib.Path('seeds/seed.txt').read_text().strip()\n"
        "target = pathlib.Path(os.environ['AZ_BATCH_NODE_SHARED_DIR']) / f\"dataset-{os.environ['AZ_BATCH_JOB_ID']}\"\n"
        "target.write_text(f\"{os.environ['DATASET']} from {seed}\\n\")\n"
        "print('prepared', target.name)\n"
    )
    with DAG("job_side_tasks", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(
            task_id="with_side_tasks",
            pool_id=shared_pool,
            # Its own container: other tests count what the default one holds.
            workspace=Workspace(str(code), container="prep-test-workspaces"),
            job_preparation={
                "command": "python3 workspace/fetch.py",
                "environment": {"DATASET": "dataset v1"},
                "inputs": [{"container": "prep-seeds", "path": "seeds"}],
            },
            job_release=(
                'rm "$AZ_BATCH_NODE_SHARED_DIR/dataset-$AZ_BATCH_JOB_ID" && '
                "echo 'release: reporting failure on purpose' >&2 && exit 3"
            ),
            command_template='echo "shard {value}: $(cat $AZ_BATCH_NODE_SHARED_DIR/dataset-$AZ_BATCH_JOB_ID)"',
            parameters=list(range(6)),
            poll_interval=0.3,
        )
    run, logs = run_dag(dag)
    assert run.get_task_instance("with_side_tasks").state == "success"
    assert sorted(line for line in logs if line.startswith("[task-")) == [
        f"[task-{n}] shard {n}: dataset v1 from seed 7" for n in range(6)
    ]
    job_id = next(line.split()[3] for line in logs if line.startswith("Submitting Batch job"))
    statuses = list(batch_client.list_job_preparation_and_release_task_status(job_id))
    assert statuses  # one per node that ran the job's tasks
    for status in statuses:
        assert status.job_preparation_task_execution_info.exit_code == 0
        assert status.job_release_task_execution_info.exit_code == 3
    warnings = [line for line in logs if line.startswith("The job release task failed on node ")]
    assert len(warnings) == len(statuses)
    assert all(
        re.fullmatch(
            r"The job release task failed on node \S+ with exit code 3 \(FailureExitCode: [^)]*\)\. "
            r"Last 1 lines of its stderr:\n    release: reporting failure on purpose",
            line,
        )
        for line in warnings
    )
