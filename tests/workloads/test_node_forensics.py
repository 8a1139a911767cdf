"""A run that fails because of its nodes keeps their Batch service logs before anything is deleted: Batch uploads
them to the connection's storage account (Azurite here), and the failure report says where."""

from __future__ import annotations

import re
import uuid
from datetime import datetime

import pytest
from airflow.sdk import DAG
from azure.batch import models as m
from azure.storage.blob import BlobServiceClient

from airflow_provider_azbatch.operators.job import AzureBatchJobOperator
from airflow_provider_azbatch.pools import BatchPool
from tests.airflow_helpers import run_dag

START = datetime(2026, 1, 1)
KEPT = re.compile(
    r"^Batch service logs of node (tvmps_\w+): (http://\S+/azbatch-node-logs/(\S+)/) \((\d+) file\(s\)\)$"
)


def _failing_start_task(task_id: str, pool: BatchPool, deferrable: bool) -> AzureBatchJobOperator:
    return AzureBatchJobOperator(
        task_id=task_id, batch_pool=pool, command="echo never runs", poll_interval=0.3, deferrable=deferrable
    )


@pytest.mark.parametrize("deferrable", [False, True])
def test_a_start_task_failure_names_the_uploaded_service_logs_which_are_in_storage(
    airflow_db, azbatch_with_storage, azurite, batch_client, deferrable
):
    # An auto pool: the job's end deletes it, and its nodes' logs with it; a shared pool for the deferred run.
    start_task = "echo mounting /datasets; echo cannot mount the dataset >&2; exit 5"
    pool_id = f"forensics-{uuid.uuid4().hex[:6]}"
    pool = (
        BatchPool.shared(pool_id, requirements={"cpus": 1}, max_nodes=1, autoscale=False, start_task=start_task)
        if deferrable
        else BatchPool.auto(requirements={"cpus": 1}, max_nodes=1, start_task=start_task)
    )
    with DAG(f"forensics_{deferrable}", schedule=None, start_date=START) as dag:
        _failing_start_task("broken", pool, deferrable)
    run, logs = run_dag(dag)
    assert run.state == "failed"
    text = "\n".join(logs)
    assert "has no usable node: node tvmps_" in text
    assert "its start task exited with code 5" in text
    kept = [match for line in text.splitlines() if (match := KEPT.match(line))]
    assert len(kept) == 1, text[-3000:]
    node_id, url, directory, files = kept[0].groups()
    assert url.startswith(azurite.url)
    assert f"/{node_id}/" in directory
    assert int(files) == 3
    assert any(line.startswith(f"Uploading the Batch service logs of node {node_id}") for line in logs)
    # The logs are in the container, though the pool (an auto pool) and the node are gone or going.
    service = BlobServiceClient.from_connection_string(azurite.connection_string)
    container = service.get_container_client("azbatch-node-logs")
    names = {blob.name for blob in container.list_blobs(name_starts_with=f"{directory}/")}
    assert names == {f"{directory}/agent.log", f"{directory}/startup/stdout.txt", f"{directory}/startup/stderr.txt"}
    agent = container.download_blob(f"{directory}/agent.log").readall().decode()
    assert "start task exited with code 5" in agent
    assert "node state waitingforstarttask -> starttaskfailed" in agent
    assert container.download_blob(f"{directory}/startup/stderr.txt").readall() == b"cannot mount the dataset\n"
    # Uploaded before the job was terminated (which deletes an auto pool).
    job_id = next(line.split()[3] for line in logs if line.startswith("Submitting Batch job"))
    job = batch_client.get_job(job_id)
    assert (job.state, job.execution_info.termination_reason) == (m.BatchJobState.COMPLETED, "PoolProblem")


def test_without_a_storage_account_the_report_says_why_no_logs_were_kept(airflow_db, azbatch_default):
    pool_id = f"forensics-nostore-{uuid.uuid4().hex[:6]}"
    pool = BatchPool.shared(pool_id, requirements={"cpus": 1}, max_nodes=1, autoscale=False, start_task="exit 3")
    with DAG("forensics_no_storage", schedule=None, start_date=START) as dag:
        _failing_start_task("broken", pool, False)
    run, logs = run_dag(dag)
    assert run.state == "failed"
    text = "\n".join(logs)
    assert re.search(
        r"Batch service logs of node tvmps_\w+ not kept: Connection 'azbatch_default': storage_account_url is missing",
        text,
    ), text[-3000:]
