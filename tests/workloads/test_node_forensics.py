"""A run that fails because of its nodes keeps their Batch service logs before anything is deleted: Batch uploads
them to the connection's storage account (Azurite here), and the failure report says where."""

from __future__ import annotations

import re
import threading
import time
import uuid
from datetime import datetime

import pytest
from airflow.sdk import DAG
from azure.batch import models as m
from azure.core.exceptions import ResourceNotFoundError
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


# What Batch says of a node whose disk is full (the local service is told, as a test tells it to preempt a node).
DISK_FULL = ("DiskFull", "There is not enough space on the node's disk.", {"Path": "/mnt/batch/tasks"})


class NodeFailer(threading.Thread):
    """Makes the node that runs the pool's job's task unusable (DISK_FULL) once the task has run a second."""

    def __init__(self, service, client, pool_id: str) -> None:
        super().__init__(daemon=True)
        self.service, self.client, self.pool_id = service, client, pool_id
        self.failed: list[str] = []
        self.errors: list[BaseException] = []
        self.stop = threading.Event()

    def _running_node(self) -> str | None:
        for job in self.client.list_jobs(filter="state eq 'active'", select=["id", "poolInfo"]):
            if job.pool_info is not None and job.pool_info.pool_id == self.pool_id:
                for task in self.client.list_tasks(job.id):
                    if task.state == m.BatchTaskState.RUNNING and task.node_info:
                        return task.node_info.node_id
        return None

    def run(self) -> None:
        deadline = time.monotonic() + 120
        while not self.failed and not self.stop.is_set() and time.monotonic() < deadline:
            try:
                node_id = self._running_node()
                if node_id is not None:
                    time.sleep(1.0)  # the run's watch has seen the task running
                    self.service.make_unusable(self.pool_id, node_id, *DISK_FULL)
                    self.failed.append(node_id)
            except ResourceNotFoundError:
                pass  # a job listed before its task was added: looked at again
            except Exception as exc:  # reported by the test
                self.errors.append(exc)
                return
            time.sleep(0.1)


@pytest.mark.parametrize("deferrable", [False, True])
def test_a_node_made_unusable_under_its_task_names_its_uploaded_service_logs_which_are_in_storage(
    airflow_db, azbatch_with_storage, azurite, batch_client, deferrable
):
    pool_id = f"forensics-unusable-{uuid.uuid4().hex[:6]}"
    pool = BatchPool.shared(pool_id, requirements={"cpus": 1}, max_nodes=1, autoscale=False)
    with DAG(f"forensics_unusable_{deferrable}", schedule=None, start_date=START) as dag:
        AzureBatchJobOperator(
            task_id="work", batch_pool=pool, command="sleep 60", poll_interval=0.3, deferrable=deferrable
        )
    failer = NodeFailer(azbatch_with_storage, batch_client, pool_id)
    failer.start()
    try:
        run, logs = run_dag(dag)
    finally:
        failer.stop.set()
        failer.join(timeout=10)
    try:
        assert (failer.errors, len(failer.failed)) == ([], 1)
        (node_id,) = failer.failed
        assert run.state == "failed"
        # The logs are in the container: the node agent's log, which says how the node failed.
        service = BlobServiceClient.from_connection_string(azurite.connection_string)
        container = service.get_container_client("azbatch-node-logs")
        names = [blob.name for blob in container.list_blobs() if f"/{pool_id}/{node_id}/" in blob.name]
        assert len(names) == 1, names
        assert names[0].endswith("/agent.log")
        directory = names[0].removesuffix("/agent.log")
        agent = container.download_blob(names[0]).readall().decode()
        assert "node state running -> unusable" in agent
        assert f"node error {DISK_FULL[0]}: {DISK_FULL[1]}" in agent
        # The failure report: why the job cannot run, in Batch's words, and where the node's logs are.
        job_id = next(line.split()[3] for line in logs if line.startswith("Submitting Batch job"))
        text = "\n".join(logs)
        report = (
            f"Batch job {job_id} cannot run: Pool {pool_id} has no usable node: node {node_id} is unusable; "
            f"{DISK_FULL[0]}: {DISK_FULL[1]} (Path={DISK_FULL[2]['Path']}); the job was terminated\n"
            f"Batch service logs of node {node_id}: {azurite.url}/azbatch-node-logs/{directory}/ (1 file(s))"
        )
        assert report in text, text[-3000:]
        assert any(
            line.startswith(f"Uploading the Batch service logs of node {node_id} (pool {pool_id})") for line in logs
        )
        job = batch_client.get_job(job_id)
        assert (job.state, job.execution_info.termination_reason) == (m.BatchJobState.COMPLETED, "PoolProblem")
    finally:
        batch_client.begin_delete_pool(pool_id, polling_interval=1).result()
