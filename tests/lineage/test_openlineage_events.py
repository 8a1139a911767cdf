"""OpenLineage events of runs with Blob inputs and outputs (Azurite), written by the OpenLineage provider's file
transport; the asset event of a declared output; and, without the OpenLineage provider, the same run with nothing
of it imported.

Each run is a ``dag.test()`` in a process of its own (tests/lineage/run_dag.py): the OpenLineage provider reads its
configuration once per process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from azure.storage.blob import BlobServiceClient

from airflow_provider_azbatch.submission.job_ids import default_job_id
from tests.airflow_helpers import azbatch_connection_json
from tests.helpers import wait_until

pytestmark = pytest.mark.azurite
ROOT = Path(__file__).resolve().parent.parent.parent
NAMESPACE = "lineage-test"


@pytest.fixture(scope="module")
def blob_inputs(azurite):
    service = BlobServiceClient(azurite.url, credential={"account_name": azurite.account, "account_key": azurite.key})
    container = service.get_container_client("lineage-in")
    if not container.exists():
        container.create_container()
    container.upload_blob("data/a.txt", b"alpha\n", overwrite=True)
    yield service
    service.close()


def _run(tmp_path: Path, dag_ids: list[str], pool: str, batch, azurite, *, block: bool = False) -> tuple[dict, Path]:
    home = tmp_path / ("home-blocked" if block else "home")
    home.mkdir()
    events = tmp_path / ("events-blocked.jsonl" if block else "events.jsonl")
    env = {key: value for key, value in os.environ.items() if not key.startswith(("AIRFLOW", "OPENLINEAGE"))}
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__UNIT_TEST_MODE": "True",
            "AIRFLOW__CORE__DAGS_FOLDER": str(home),
            "AIRFLOW__AZBATCH__MIN_DEFERRAL_SECONDS": "0",
            "AIRFLOW__OPENLINEAGE__NAMESPACE": NAMESPACE,
            "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(
                {"type": "file", "log_file_path": str(events), "append": True}
            ),
            "AIRFLOW_CONN_AZBATCH_DEFAULT": azbatch_connection_json(
                batch, storage_account_url=azurite.url, storage_account_key=azurite.key
            ),
            "BLOCK_OPENLINEAGE": "1" if block else "0",
        }
    )
    output = tmp_path / ("blocked.json" if block else "runs.json")
    done = subprocess.run(
        [sys.executable, "-m", "tests.lineage.run_dag", ",".join(dag_ids), pool, str(output)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return json.loads(output.read_text()), events


def _events(path: Path, job: str) -> list[dict]:
    if not path.exists():
        return []
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [event for event in lines if event.get("job", {}).get("name") == job]


def _datasets(event: dict, kind: str) -> set[tuple[str, str]]:
    return {(item["namespace"], item["name"]) for item in event[kind]}


def test_a_run_emits_start_and_complete_naming_its_blobs_and_fail_with_the_error(
    tmp_path, azbatch_with_storage, azurite, shared_pool, blob_inputs
):
    runs, events_file = _run(
        tmp_path, ["lineage_training", "lineage_failing", "lineage_torchx"], shared_pool, azbatch_with_storage, azurite
    )
    port = azurite.url.rsplit(":", 1)[1].split("/")[0]
    blob = f"wasb://{{}}@127.0.0.1:{port}/{azurite.account}"
    inputs, outputs = blob.format("lineage-in"), blob.format("lineage-out")

    trained = runs["lineage_training"]
    assert (trained["state"], trained["task_state"]) == ("success", "success"), "\n".join(trained["logs"][-30:])
    job_id = default_job_id("lineage_training", "train", trained["run_id"], -1)
    run_path = f"runs/{trained['run_id'].replace(':', '_')}"

    def both() -> list[dict]:
        found = _events(events_file, "lineage_training.train")
        return found if {"START", "COMPLETE"} <= {event["eventType"] for event in found} else []

    events = wait_until(both, timeout=60, interval=0.5, what="START and COMPLETE events")
    (start,) = [event for event in events if event["eventType"] == "START"]
    (complete,) = [event for event in events if event["eventType"] == "COMPLETE"]
    assert (inputs, "data") in _datasets(start, "inputs")
    assert (outputs, run_path) in _datasets(start, "outputs")
    assert _datasets(complete, "inputs") == {(inputs, "data")}
    assert _datasets(complete, "outputs") == {
        (outputs, run_path),
        (outputs, f"azbatch-logs/{job_id}"),
        (outputs, f"azbatch-logs/{job_id}/main/result/result.json"),
    }
    assert start["run"]["facets"]["azureBatchJob"]["jobId"] == job_id
    facet = complete["run"]["facets"]["azureBatchJob"]
    assert {key: facet[key] for key in ("account", "jobId", "poolId", "nodeCount", "exitCodes", "jobState")} == {
        "account": azbatch_with_storage.account_name,
        "jobId": job_id,
        "poolId": shared_pool,
        "nodeCount": 1,
        "exitCodes": {"main": 0},
        "jobState": "completed",
    }
    assert facet["vmSize"]
    assert facet["costEstimate"]["basis"]

    # The Batch task got the task's OpenLineage run as its parent, and the DAG run as the root.
    written = trained["xcom"]["return_value"]
    run_id = complete["run"]["runId"]
    dag_run = complete["run"]["facets"]["parent"]["root"]["run"]["runId"]
    assert written["parent_id"] == f"{NAMESPACE}/lineage_training.train/{run_id}"
    assert written["context"] == {
        "parent": {
            "run": {"runId": run_id},
            "job": {"namespace": NAMESPACE, "name": "lineage_training.train"},
            "root": {"run": {"runId": dag_run}, "job": {"namespace": NAMESPACE, "name": "lineage_training"}},
        }
    }

    # Every Blob read and write, as Airflow's hook lineage collector was told (in the asset URIs' form).
    account = f"wasb://127.0.0.1:{port}/{azurite.account}"
    assert f"{account}/lineage-in/data" in trained["hook_inputs"]
    assert {f"{account}/lineage-out/{run_path}", f"{account}/lineage-out/azbatch-logs"} <= set(trained["hook_outputs"])

    # The declared output's asset: what the job wrote, and its result.
    (event,) = trained["asset_events"]
    assert event["name"] == "lineage_test_model"
    assert event["extra"]["job_id"] == job_id
    written = f"wasb://127.0.0.1:{port}/{azurite.account}/lineage-out/{run_path}"
    assert sorted(event["extra"]["blobs"]) == [f"{written}/config.json", f"{written}/weights.bin"]
    assert event["extra"]["return_value"]["auc"] == 0.93
    assert event["extra"]["results"]["main"]["auc"] == 0.93

    failed = runs["lineage_failing"]
    assert failed["task_state"] == "failed"
    fails = wait_until(
        lambda: [e for e in _events(events_file, "lineage_failing.train") if e["eventType"] == "FAIL"],
        timeout=60,
        interval=0.5,
        what="the FAIL event",
    )
    error = fails[0]["run"]["facets"]["errorMessage"]
    assert "exit code 3" in error["message"]
    assert "loss is nan" in error["message"]
    assert fails[0]["run"]["facets"]["azureBatchJob"]["exitCodes"] == {"main": 3}
    assert _datasets(fails[0], "inputs") == {(inputs, "data")}
    assert not failed["asset_events"]

    # A TorchX app's run: its Batch job and its Blob data the same way.
    app = runs["lineage_torchx"]
    assert app["task_state"] == "success", "\n".join(app["logs"][-30:])
    app_job = default_job_id("lineage_torchx", "train", app["run_id"], -1)
    (app_complete,) = wait_until(
        lambda: [e for e in _events(events_file, "lineage_torchx.train") if e["eventType"] == "COMPLETE"],
        timeout=60,
        interval=0.5,
        what="the TorchX app's COMPLETE event",
    )
    app_facet = app_complete["run"]["facets"]["azureBatchJob"]
    assert (app_facet["jobId"], app_facet["poolId"], list(app_facet["exitCodes"].values())) == (
        app_job,
        "lineage-torchx-pool",
        [0],
    )
    assert _datasets(app_complete, "inputs") == {(inputs, "data")}
    assert (outputs, f"azbatch-logs/{app_job}") in _datasets(app_complete, "outputs")


def test_without_the_openlineage_provider_nothing_of_it_is_imported_and_the_run_is_the_same(
    tmp_path, azbatch_with_storage, azurite, shared_pool, blob_inputs
):
    runs, events_file = _run(tmp_path, ["lineage_training"], shared_pool, azbatch_with_storage, azurite, block=True)
    trained = runs["lineage_training"]
    assert (trained["state"], trained["task_state"]) == ("success", "success"), "\n".join(trained["logs"][-30:])
    assert trained["imported"] == []
    assert not events_file.exists()
    assert (trained["hook_inputs"], trained["hook_outputs"]) == ([], [])  # no reader: Airflow's no-op collector
    # No parent run in the Batch task's environment; the asset event is there all the same.
    assert trained["xcom"]["return_value"] == {"auc": 0.93, "parent_id": "unset", "context": None}
    (event,) = trained["asset_events"]
    assert event["extra"]["return_value"] == {"auc": 0.93, "parent_id": "unset", "context": None}
    assert len(event["extra"]["blobs"]) == 2


def test_the_run_facets_schema_ships_with_the_package_and_names_its_fields():
    """(Here, not in tests/unit: it imports the OpenLineage provider, which the dependency floors' set has at a
    version that does not import on the newest Airflow.)"""
    import json
    from importlib import resources

    import attr

    from airflow_provider_azbatch.lineage.openlineage import SCHEMA_URL, AzureBatchJobRunFacet

    schema = json.loads(
        resources.files("airflow_provider_azbatch.lineage").joinpath("AzureBatchJobRunFacet.json").read_text()
    )
    assert schema["$id"] == SCHEMA_URL
    documented = schema["$defs"]["AzureBatchJobRunFacet"]["allOf"][1]["properties"]
    assert set(documented) == {
        field.name for field in attr.fields(AzureBatchJobRunFacet) if not field.name.startswith("_")
    }
    facet = AzureBatchJobRunFacet(account="a", accountUrl="https://a.westeurope.batch.azure.com")
    assert facet._schemaURL == SCHEMA_URL
