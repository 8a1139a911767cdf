"""`azbatch-dev`, the one command of docs/howto/local-development.md, run as a user runs it: from a folder
holding their DAGs folder, stopped with Ctrl-C (SIGINT) or SIGTERM, leaving no process and no port behind."""

from __future__ import annotations

import json
import re
import shutil
import signal
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.devenv.devenv_process import Api, DevEnv, listening
from tests.helpers import wait_until

pytestmark = [pytest.mark.airflow_run, pytest.mark.azurite]

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
DAG_ID = "my_pipeline"
# The commands the how-to shows, each run here as it is written (tests/devenv/test_docs.py checks the page).
START = "azbatch-dev start dags"
START_PERSISTED = "azbatch-dev start dags --persist"
DAGS_TEST = "azbatch-dev test my_pipeline dags"  # tests/devenv/test_from_wheels.py
DAGS_TEST_NO_STORAGE = "azbatch-dev test hello_batch dags --no-storage"
# Each Batch output line of my_pipeline, as the task log shows it: "[<Batch task id>] <line>".
SCORE_LINES = [f"devenv score step {step}/5" for step in range(1, 6)]
TWO_NODE_LINES = [f"devenv two-node line {n}" for n in range(1, 5)]


@pytest.fixture
def workdir(tmp_path):
    """A user's project: a folder with their DAGs folder in it."""
    shutil.copytree(Path(__file__).parent / "dags", tmp_path / "dags")
    return tmp_path


def batch_lines(log: list[str], lines: list[str], *, whole: bool = True) -> Counter[str]:
    """How often each expected Batch line appears, after the "[<Batch task id>] " prefix the provider adds: as
    a whole log entry (the API's log), or inside a line of console output (``whole=False``)."""
    found: Counter[str] = Counter()
    for entry in log:
        for line in lines:
            pattern = rf"\[[^\]]+\] {re.escape(line)}"
            if re.fullmatch(pattern, entry) if whole else re.search(rf"{pattern}(\s|$)", entry):
                found[line] += 1
    return found


def assert_nothing_left(env: DevEnv) -> None:
    assert env.leftover_pids() == []
    assert [port for port in env.ports() if listening(port)] == []


def test_start_runs_the_users_dag_in_a_whole_local_airflow_and_ctrl_c_leaves_nothing(workdir):
    env = DevEnv(START, workdir, BIN)
    try:
        env.wait_for_line("== Ready. Ctrl-C stops everything.")
        exports = env.exports()
        assert exports["AIRFLOW_HOME"] == str(workdir / ".azbatch-dev" / "airflow")
        assert exports["AIRFLOW__CORE__DAGS_FOLDER"] == str(workdir / "dags")
        api = Api(env.ui())
        wait_until(lambda: DAG_ID in {dag["dag_id"] for dag in api("GET", "/dags")["dags"]}, timeout=120, interval=1)
        api("PATCH", f"/dags/{DAG_ID}", {"is_paused": False})
        run_id = api("POST", f"/dags/{DAG_ID}/dagRuns", {"logical_date": None})["dag_run_id"]
        wait_until(lambda: _run_state(api, run_id) in ("success", "failed"), timeout=300, interval=1, what="the run")
        states = {
            ti["task_id"]: ti["state"]
            for ti in api("GET", f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances")["task_instances"]
        }
        assert states == {"score": "success", "two_nodes": "success"}, env.output
        assert api("GET", f"/dags/{DAG_ID}/dagRuns/{run_id}")["state"] == "success"
        assert batch_lines(api.log(DAG_ID, run_id, "score"), SCORE_LINES) == Counter(SCORE_LINES)
        assert batch_lines(api.log(DAG_ID, run_id, "two_nodes"), TWO_NODE_LINES) == Counter(TWO_NODE_LINES)
        blob = _blob_names(exports)
        assert any(name.endswith("/model.txt") for name in blob), blob
        batch_jobs = _batch_job_ids(exports)
        assert batch_jobs, "the run's Batch jobs"

        env.signal(signal.SIGINT)
        assert env.wait() == 0
        assert "== Stopped: nothing of this environment is left running" in env.output
        assert_nothing_left(env)

        # Started again with --persist: the run, the blob it uploaded and its Batch jobs are still there; SIGTERM
        # stops it.
        again = DevEnv(START_PERSISTED, workdir, BIN)
        try:
            again.wait_for_line("== Ready. Ctrl-C stops everything.")
            api = Api(again.ui())
            assert api("GET", f"/dags/{DAG_ID}/dagRuns/{run_id}")["state"] == "success"
            assert batch_lines(api.log(DAG_ID, run_id, "two_nodes"), TWO_NODE_LINES) == Counter(TWO_NODE_LINES)
            assert _blob_names(again.exports()) == blob
            assert _batch_job_ids(again.exports()) == batch_jobs
            again.signal(signal.SIGTERM)
            assert again.wait() == 0
            assert_nothing_left(again)
        finally:
            again.kill()
    finally:
        env.kill()


def _run_state(api: Api, run_id: str) -> str | None:
    try:
        return api("GET", f"/dags/{DAG_ID}/dagRuns/{run_id}")["state"]
    except TimeoutError:  # an API server slow to answer on a busy machine: ask again
        return None


def _blob_names(exports: dict[str, str]) -> list[str]:
    from azure.storage.blob import BlobServiceClient

    extra = json.loads(exports["AIRFLOW_CONN_AZBATCH_DEFAULT"])["extra"]
    client = BlobServiceClient(
        extra["storage_account_url"],
        credential={
            "account_name": "devstoreaccount1",
            "account_key": extra["storage_account_key"],
        },
    )
    with client:
        return sorted(blob.name for blob in client.get_container_client("devenv-results").list_blobs())


def _batch_job_ids(exports: dict[str, str]) -> list[str]:
    """The jobs the environment's local Batch service lists, through the SDK."""
    from azure.batch import BatchClient
    from azure.core.credentials import AzureNamedKeyCredential

    connection = json.loads(exports["AIRFLOW_CONN_AZBATCH_DEFAULT"])
    client = BatchClient(
        connection["extra"]["account_url"], AzureNamedKeyCredential(connection["login"], connection["password"])
    )
    with client:
        return sorted(job.id for job in client.list_jobs())


def test_dags_test_runs_one_dag_and_exits_with_its_outcome_without_storage(workdir):
    env = DevEnv(DAGS_TEST_NO_STORAGE, workdir, BIN)
    try:
        assert env.wait(timeout=300) == 0, env.output
        assert "== No storage (--no-storage): @task.azure_batch, workspaces and Blob inputs/outputs will fail" in (
            env.output
        )
        assert "== airflow dags test hello_batch exited with 0" in env.output
        assert batch_lines(env.lines, ["hello from a local Batch node"], whole=False) == Counter(
            ["hello from a local Batch node"]
        )
        connection = json.loads(env.exports()["AIRFLOW_CONN_AZBATCH_DEFAULT"])
        assert "storage_account_url" not in connection["extra"]
        # dags test needs no deployment: no API server settings to export.
        assert "AIRFLOW__API__PORT" not in env.exports()
        assert_nothing_left(env)
    finally:
        env.kill()
