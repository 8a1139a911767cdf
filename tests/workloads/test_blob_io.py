"""Inputs and outputs in Blob (Azurite): downloads into the working dir, uploads of outputs and logs
with write-only SAS tokens, and logs read back from Blob once the job's auto-pool is gone."""

from __future__ import annotations

from datetime import datetime

import pytest
from airflow.sdk import DAG
from azure.core.exceptions import HttpResponseError
from azure.storage.blob import BlobServiceClient, ContainerClient

from airflow_provider_azbatch.hooks.batch import AzureBatchHook
from airflow_provider_azbatch.operators.job import AzureBatchJobOperator
from airflow_provider_azbatch.pools import BatchPool
from airflow_provider_azbatch.sensors.job import AzureBatchJobSensor
from tests.airflow_helpers import run_dag
from tests.helpers import wait_until

pytestmark = pytest.mark.azurite
START = datetime(2026, 1, 1)


@pytest.fixture
def blobs(azurite):
    service = BlobServiceClient(azurite.url, credential={"account_name": azurite.account, "account_key": azurite.key})
    yield service
    service.close()


def _names(service: BlobServiceClient, container: str) -> list[str]:
    return sorted(blob.name for blob in service.get_container_client(container).list_blobs())


def test_inputs_outputs_and_logs_travel_through_blob(airflow_db, azbatch_with_storage, blobs, batch_client):
    inputs = blobs.get_container_client("inputs")
    if not inputs.exists():
        inputs.create_container()
    inputs.upload_blob("data/a.txt", b"alpha\n", overwrite=True)
    inputs.upload_blob("data/sub/b.txt", b"beta\n", overwrite=True)
    inputs.upload_blob("other/ignored.txt", b"no\n", overwrite=True)
    with DAG("blob_io", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(
            task_id="io",
            batch_pool=BatchPool.auto(requirements={"cpus": 1}, max_nodes=1),
            command=(
                "find in -type f | sort; cat in/data/a.txt in/data/sub/b.txt; mkdir -p out; "
                "echo trained > out/model.txt; echo metrics > out/metrics.txt; echo to-stderr >&2"
            ),
            inputs=[{"container": "inputs", "prefix": "data/", "path": "in"}],
            outputs=[{"pattern": "out/*.txt", "path": "results/{{ ds_nodash }}"}],
            output_container="outputs",
            poll_interval=0.3,
        )
    run, logs = run_dag(dag)
    assert run.state == "success"
    assert [line for line in logs if line.startswith("[main] ")] == [
        "[main] in/data/a.txt",
        "[main] in/data/sub/b.txt",
        "[main] alpha",
        "[main] beta",
    ]
    job_id = next(line.split()[3] for line in logs if line.startswith("Submitting Batch job"))
    ds = run.logical_date.strftime("%Y%m%d")
    assert set(_names(blobs, "outputs")) >= {
        f"azbatch-logs/{job_id}/main/stderr.txt",
        f"azbatch-logs/{job_id}/main/stdout.txt",
        f"results/{ds}/metrics.txt",
        f"results/{ds}/model.txt",
    }
    outputs = blobs.get_container_client("outputs")
    assert outputs.download_blob(f"results/{ds}/model.txt").readall() == b"trained\n"
    assert outputs.download_blob(f"azbatch-logs/{job_id}/main/stderr.txt").readall() == b"to-stderr\n"

    # The SAS the task got can write but neither read nor delete.
    task = batch_client.get_task(job_id, "main")
    sas_url = task.output_files[0].destination.container.container_url
    assert "sig=" in sas_url
    assert "sp=cw" in sas_url
    writable = ContainerClient.from_container_url(sas_url)
    with pytest.raises(HttpResponseError) as read:
        writable.download_blob(f"results/{ds}/model.txt").readall()
    assert read.value.status_code == 403
    with pytest.raises(HttpResponseError) as delete:
        writable.delete_blob(f"results/{ds}/model.txt")
    assert delete.value.status_code == 403
    assert sas_url not in "\n".join(logs)

    # Once the job ended, its auto-pool (and the node holding the files) goes: the logs come from Blob.
    pool_id = batch_client.get_job(job_id).execution_info.pool_id
    wait_until(lambda: pool_id not in {p.id for p in batch_client.list_pools()}, what="auto-pool deleted")
    with DAG("blob_logs_after_pool", schedule=None, start_date=START) as later:
        AzureBatchJobSensor(task_id="watch", job_id=job_id, stream_output=True, poke_interval=0.3)
    run2, logs2 = run_dag(later)
    assert run2.state == "success"
    assert "[main] alpha" in logs2
    assert "[main:stderr] to-stderr" in logs2


def test_missing_storage_settings_fail_before_submitting(airflow_db, azbatch_default, shared_pool):
    hook = AzureBatchHook()
    before = sorted(job.id for job in hook.list_jobs(select=["id"]))
    with DAG("blob_not_configured", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(
            task_id="io", pool_id=shared_pool, command="true", outputs=[{"pattern": "*.txt", "container": "results"}]
        )
    run, logs = run_dag(dag)
    assert run.state == "failed"
    assert (
        "Connection 'azbatch_default': storage_account_url is missing: Blob inputs and outputs need a storage account "
        "(e.g. https://<account>.blob.core.windows.net), with storage_account_key or an Entra ID auth_method"
    ) in "\n".join(logs)
    assert sorted(job.id for job in hook.list_jobs(select=["id"])) == before
