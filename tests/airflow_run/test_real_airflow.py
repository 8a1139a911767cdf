"""A real Airflow deployment (API server, scheduler, DAG processor, triggerer) runs the example
deferrable DAG against the local Batch service, driven and checked through the REST API."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from airflow_provider_azbatch.emulator.testing import run_local_batch_service
from airflow_provider_azbatch.utils.job_ids import default_job_id
from tests.airflow_helpers import azbatch_connection_json
from tests.airflow_run.cluster import AirflowCluster
from tests.helpers import wait_until

pytestmark = pytest.mark.airflow_run

ROOT = Path(__file__).resolve().parent.parent.parent
DAG_ID = "example_azbatch_deferrable"
STEP = re.compile(r"^\[train\] step (\d+)/(\d+) loss \d+$")


@pytest.fixture(scope="module")
def batch():
    with run_local_batch_service(extra_args=["--quiet"]) as service:
        yield service


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, batch):
    cluster = AirflowCluster(
        tmp_path_factory.mktemp("airflow-run"),
        ROOT / "example_dags",
        {"AIRFLOW_CONN_AZBATCH_DEFAULT": azbatch_connection_json(batch)},
    )
    try:
        cluster.start()
        cluster.wait_for_dag(DAG_ID)
        yield cluster
    finally:
        cluster.stop()


def _steps(log: list[str]) -> Counter[int]:
    return Counter(int(match.group(1)) for line in log if (match := STEP.match(line)))


@pytest.fixture(scope="module")
def batch_client(batch):
    from azure.batch import BatchClient
    from azure.core.credentials import AzureNamedKeyCredential

    client = BatchClient(batch.url, AzureNamedKeyCredential(batch.account_name, batch.account_key))
    yield client
    client.close()


def _job_id(run_id: str) -> str:
    return default_job_id(DAG_ID, "train", run_id, -1)


def test_output_streams_while_deferred_and_appears_once(cluster):
    run_id = cluster.trigger(DAG_ID, {"steps": 60})
    wait_until(lambda: cluster.task_state(DAG_ID, run_id, "train") == "deferred", timeout=120, what="train deferred")

    def streamed_while_deferred() -> bool:
        log = cluster.task_log(DAG_ID, run_id, "train")
        return len(_steps(log)) >= 5 and cluster.task_state(DAG_ID, run_id, "train") == "deferred"

    wait_until(streamed_while_deferred, timeout=60, interval=1, what="output in the log while deferred")
    wait_until(lambda: cluster.run_state(DAG_ID, run_id) in ("success", "failed"), timeout=180, interval=1)
    assert cluster.run_state(DAG_ID, run_id) == "success"
    steps = _steps(cluster.task_log(DAG_ID, run_id, "train"))
    assert steps == Counter(range(1, 61))


def test_a_triggerer_restart_loses_no_line(cluster):
    run_id = cluster.trigger(DAG_ID, {"steps": 100})
    wait_until(
        lambda: (
            cluster.task_state(DAG_ID, run_id, "train") == "deferred"
            and len(_steps(cluster.task_log(DAG_ID, run_id, "train"))) >= 10
        ),
        timeout=120,
        interval=1,
        what="deferred with output",
    )
    cluster.stop_component("triggerer")
    before_restart = _steps(cluster.task_log(DAG_ID, run_id, "train"))
    cluster.start_component("triggerer")
    wait_until(lambda: cluster.run_state(DAG_ID, run_id) in ("success", "failed"), timeout=240, interval=1)
    assert cluster.run_state(DAG_ID, run_id) == "success"
    log = cluster.task_log(DAG_ID, run_id, "train")
    steps = _steps(log)
    assert set(steps) == set(range(1, 101))  # nothing lost
    repeated = sum(count - 1 for count in steps.values())
    # The new triggerer starts from the last checkpoint: at most one poll's lines may repeat.
    assert repeated <= 8, f"{repeated} lines repeated"
    assert any(f"Resuming Batch job {_job_id(run_id)} output from the last checkpoint" in line for line in log)
    assert max(before_restart) < 100  # the restart really happened mid-run
    # A restart is not a kill: the job ran to its end (and was deleted as the DAG asks on success).
    assert not any("Terminated Batch job" in line for line in log)
    assert f"Deleting Batch job {_job_id(run_id)} (on_finish_action=delete_succeeded_job)" in log


def test_marking_a_deferred_task_failed_terminates_its_job(cluster, batch_client):
    from azure.batch import models as m

    run_id = cluster.trigger(DAG_ID, {"steps": 400})
    wait_until(
        lambda: (
            cluster.task_state(DAG_ID, run_id, "train") == "deferred"
            and len(_steps(cluster.task_log(DAG_ID, run_id, "train"))) >= 3
        ),
        timeout=120,
        interval=1,
        what="deferred with output",
    )
    job_id = _job_id(run_id)
    assert batch_client.get_job(job_id).state == m.BatchJobState.ACTIVE
    cluster.mark(DAG_ID, run_id, "train", "failed")
    job = wait_until(
        lambda: (j := batch_client.get_job(job_id)).state == m.BatchJobState.COMPLETED and j,
        timeout=60,
        interval=0.5,
        what="the Batch job terminated",
    )
    assert job.execution_info.termination_reason == "AirflowTaskKilled"
