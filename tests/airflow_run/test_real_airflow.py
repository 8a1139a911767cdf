"""A real Airflow deployment (API server, scheduler, DAG processor, triggerer) runs the example
deferrable DAG against the local Batch service, driven and checked through the REST API."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import time
from collections import Counter
from pathlib import Path

import pytest

from airflow_provider_azbatch import compat
from airflow_provider_azbatch.submission.job_ids import default_job_id
from local_azure_batch.testing import run_local_batch_service
from tests.airflow_helpers import azbatch_connection_json
from tests.airflow_run.cluster import AirflowCluster
from tests.helpers import wait_until
from tests.statsd_server import StatsdServer

pytestmark = pytest.mark.airflow_run

ROOT = Path(__file__).resolve().parent.parent.parent
DAG_ID = "example_azbatch_deferrable"
# Scheduled on an asset whose watcher fires when a TorchX training job succeeds.
WATCHER_DAG_ID = "example_azbatch_job_events"
STEP = re.compile(r"^\[train\] step (\d+)/(\d+) loss \d+$")
# What the triggerer logs when it stops a trigger that sent no event (3.0: "trigger ... completed").
# The example DAG's poll interval, and how long a cancelled trigger takes at most to end a killed task's job
# (the triggerer's loop, a second; reading the task instance's state and its job record; the terminate request).
POLL_INTERVAL = 1
KILL_BOUND = 30


@pytest.fixture(scope="module")
def batch():
    with run_local_batch_service(extra_args=["--quiet"]) as service:
        yield service


REGISTRY_PASSWORD = "registry-password-8c1e7f"


@pytest.fixture(scope="module")
def statsd():
    server = StatsdServer()
    yield server
    server.close()


@pytest.fixture(scope="module")
def storage():
    from tests.azurite import run_azurite

    with run_azurite() as service:
        yield service


@pytest.fixture(scope="module")
def openlineage_events(tmp_path_factory):
    return tmp_path_factory.mktemp("openlineage") / "events.jsonl"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, batch, storage, statsd, openlineage_events):
    # The deployment's DAGs: the example deferrable DAG and the checks in tests/airflow_run/dags.
    dags = tmp_path_factory.mktemp("dags")
    shutil.copy(ROOT / "example_dags" / f"{DAG_ID}.py", dags)
    shutil.copy(Path(__file__).parent / "dags" / "azbatch_cluster_checks.py", dags)
    shutil.copy(Path(__file__).parent / "dags" / "azbatch_lineage.py", dags)
    shutil.copy(ROOT / "example_dags" / f"{WATCHER_DAG_ID}.py", dags)
    registry = {
        "conn_type": "generic",
        "host": "registry.example.test",
        "login": "puller",
        "password": REGISTRY_PASSWORD,
    }
    cluster = AirflowCluster(
        tmp_path_factory.mktemp("airflow-run"),
        dags,
        {
            "AIRFLOW_CONN_AZBATCH_DEFAULT": azbatch_connection_json(
                batch, storage_account_url=storage.url, storage_account_key=storage.key
            ),
            "AIRFLOW_CONN_TEST_REGISTRY": json.dumps(registry),
            **statsd.airflow_env,
            # The OpenLineage provider's events, one JSON a line, from every component.
            "AIRFLOW__OPENLINEAGE__NAMESPACE": "deployment",
            "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(
                {"type": "file", "log_file_path": str(openlineage_events), "append": True}
            ),
        },
    )
    try:
        cluster.start()
        for dag_id in (
            DAG_ID,
            "azbatch_shared_pool_race",
            "azbatch_registry_secret",
            "azbatch_deferral_timeout",
            "azbatch_taskflow",
            "azbatch_lineage_training",
            "azbatch_lineage_evaluation",
            WATCHER_DAG_ID,
        ):
            cluster.wait_for_dag(dag_id)
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


def test_output_streams_while_deferred_and_appears_once(cluster, statsd):
    run_id = cluster.trigger(DAG_ID, {"steps": 60})
    wait_until(lambda: cluster.task_state(DAG_ID, run_id, "train") == "deferred", timeout=120, what="train deferred")

    def streamed_while_deferred() -> bool:
        log = cluster.task_log(DAG_ID, run_id, "train")
        return len(_steps(log)) >= 5 and cluster.task_state(DAG_ID, run_id, "train") == "deferred"

    wait_until(streamed_while_deferred, timeout=60, interval=1, what="output in the log while deferred")
    cluster.wait_for_success(DAG_ID, run_id, timeout=180)
    steps = _steps(cluster.task_log(DAG_ID, run_id, "train"))
    assert steps == Counter(range(1, 61))
    # The log as the UI downloads it (the triggerer's "Trigger fired event" line in full included): each line
    # of the job's output once, the last one too.
    downloaded = cluster.task_log_download(DAG_ID, run_id, "train")
    for step in (1, 30, 59, 60):
        assert downloaded.count(f"[train] step {step}/60 ") == 1, step
    # The submission was counted as ResumableJobMixin counts its own, through Airflow's metrics backend.
    wait_until(lambda: statsd.count("airflow.resumable_job.fresh_submit") >= 1, timeout=30, what="the metric")


def _seconds(entry: dict) -> float:
    from datetime import datetime

    return datetime.fromisoformat(entry["timestamp"].replace("Z", "+00:00")).timestamp()


def test_first_output_appears_within_a_poll_of_the_trigger_start(cluster):
    run_id = cluster.trigger(DAG_ID, {"steps": 40})
    cluster.wait_for_run_end(DAG_ID, run_id, timeout=180)
    entries = cluster.task_log_entries(DAG_ID, run_id, "train")
    started = next(e for e in entries if str(e.get("event", "")).startswith("trigger ") and "starting" in e["event"])
    first = next(e for e in entries if STEP.match(str(e.get("event", ""))) and _seconds(e) >= _seconds(started))
    delay = _seconds(first) - _seconds(started)
    print(f"first streamed line {delay:.2f} s after the trigger started")
    assert delay <= 1 + 1  # poll_interval (1 s) + 1 s
    # Each Batch task's lines come from its own logger: the UI's "Sources" filter can show one task alone.
    assert {e.get("logger") for e in entries if STEP.match(str(e.get("event", "")))} == {"azbatch.task.train"}
    # The job's summary closes the log as a collapsible group.
    events = [str(e.get("event", "")) for e in entries]
    start = next(i for i, event in enumerate(events) if event.startswith("::group::Batch job "))
    assert events[start].endswith(": 1 task(s), 1 succeeded")
    assert events[start + 1].split() == ["task", "state", "exit", "node", "duration"]
    assert events[start + 2].split()[:3] == ["train", "succeeded", "0"]
    assert events[start + 3] == "::endgroup::"


def test_a_triggerer_restart_loses_no_line(cluster, batch):
    # 4 lines a second: after 60 lines the trigger is past its first FRESH_SECONDS and checkpoints.
    run_id = cluster.trigger(DAG_ID, {"steps": 120})
    wait_until(
        lambda: (
            cluster.task_state(DAG_ID, run_id, "train") == "deferred"
            and len(_steps(cluster.task_log(DAG_ID, run_id, "train"))) >= 60
        ),
        timeout=120,
        interval=1,
        what="deferred with output",
    )
    cluster.stop_component("triggerer")  # SIGTERM: a graceful shutdown
    before_restart = _steps(cluster.task_log(DAG_ID, run_id, "train"))
    # A stopped triggerer cancelled the trigger, which found its task still deferred: the job goes on.
    assert _terminations(batch, _job_id(run_id)) == []
    cluster.start_component("triggerer")
    cluster.wait_for_success(DAG_ID, run_id, timeout=240)
    log = cluster.task_log(DAG_ID, run_id, "train")
    steps = _steps(log)
    assert set(steps) == set(range(1, 121))  # nothing lost
    repeated = sum(count - 1 for count in steps.values())
    print(f"triggerer restart: {repeated} repeated lines of 120")
    resumed = f"Resuming Batch job {_job_id(run_id)} output from the last checkpoint"
    if compat.TRIGGER_XCOM:
        # A graceful stop writes a last checkpoint, and the new triggerer starts from it.
        assert repeated == 0, f"{repeated} lines repeated"
        assert any(resumed in line for line in log)
    else:
        # No checkpoint: the new trigger starts from where the task deferred, so what was shown is shown again.
        assert not any(resumed in line for line in log)
        assert repeated >= len(before_restart)
    assert max(before_restart) < 120  # the restart really happened mid-run
    # A restart is not a kill: the job ran to its end (and was deleted as the DAG asks on success).
    assert not any("Terminated Batch job" in line for line in log)
    assert _terminations(batch, _job_id(run_id)) == []
    assert f"Deleting Batch job {_job_id(run_id)} (on_finish_action=delete_succeeded_job)" in log


def _deferred_with_output(cluster, run_id: str, lines: int = 3) -> None:
    wait_until(
        lambda: (
            cluster.task_state(DAG_ID, run_id, "train") == "deferred"
            and len(_steps(cluster.task_log(DAG_ID, run_id, "train"))) >= lines
        ),
        timeout=120,
        interval=1,
        what="deferred with output",
    )


def _terminations(batch, job_id: str) -> list[dict]:
    return batch.request_log(jobs=[job_id], operations=["Jobs_TerminateJob"])


def _marked_and_terminated(cluster, batch, batch_client, state: str) -> tuple[float, float]:
    """Mark the deferred task ``state`` (as the UI does); its Batch job terminated with the task's kill, the
    trigger's word for it in the task log. How long after the mark the terminate request came, and the job ended."""
    from azure.batch import models as m

    run_id = cluster.trigger(DAG_ID, {"steps": 400})
    _deferred_with_output(cluster, run_id)
    job_id = _job_id(run_id)
    assert batch_client.get_job(job_id).state == m.BatchJobState.ACTIVE
    marked_at = time.time()
    cluster.mark(DAG_ID, run_id, "train", state)
    # Every line: 3.3 calls the trigger's on_kill; before, the cancelled trigger asks its task instance's state.
    job = wait_until(
        lambda: (j := batch_client.get_job(job_id)).state == m.BatchJobState.COMPLETED and j,
        timeout=POLL_INTERVAL + KILL_BOUND + 30,
        interval=0.5,
        what="the Batch job terminated",
    )
    assert job.execution_info.termination_reason == "AirflowTaskKilled"
    (terminate,) = _terminations(batch, job_id)
    wait_until(
        lambda: any(
            "Terminated Batch job" in line and f"the task was marked {state}" in line
            for line in cluster.task_log(DAG_ID, run_id, "train")
        ),
        timeout=30,
        interval=0.5,
        what="the trigger's word that it terminated the job",
    )
    return terminate["at"] - marked_at, job.execution_info.end_time.timestamp() - marked_at


def test_marking_a_deferred_task_failed_terminates_its_job(cluster, batch, batch_client, capsys):
    """Bounds the kill on each line, and prints its figure (docs/reference/airflow-lines.md quotes them) as one
    line, ``kill figure: Airflow <version>: ...``, in the output of ``make compat-deployment LINE=<line>`` (and of
    ``make test`` on the newest line)."""
    delay, ended = _marked_and_terminated(cluster, batch, batch_client, "failed")
    with capsys.disabled():
        print(
            f"\nkill figure: Airflow {compat.AIRFLOW_VERSION}: marked failed -> terminate request {delay:.1f} s, "
            f"-> job completed {ended:.1f} s"
        )
    assert delay <= POLL_INTERVAL + KILL_BOUND
    assert ended <= POLL_INTERVAL + KILL_BOUND + 1


def test_marking_a_deferred_task_success_terminates_its_job(cluster, batch, batch_client):
    """Marked success is a kill too (the user says the task is done: its job must not run on)."""
    delay, ended = _marked_and_terminated(cluster, batch, batch_client, "success")
    assert delay <= POLL_INTERVAL + KILL_BOUND
    assert ended <= POLL_INTERVAL + KILL_BOUND + 1


def test_clearing_a_deferred_task_ends_its_job_and_the_next_try_runs_one(cluster, batch, batch_client):
    from azure.batch import models as m

    # 30 s of output: long enough to be cleared while it runs, short enough for the next try's job.
    run_id = cluster.trigger(DAG_ID, {"steps": 120})
    _deferred_with_output(cluster, run_id)
    job_id = _job_id(run_id)
    cluster.clear(DAG_ID, run_id, "train")
    cluster.wait_for_success(DAG_ID, run_id, timeout=300)
    second_log = cluster.task_log(DAG_ID, run_id, "train", try_number=2)
    if any(f"Reattaching to Batch job {job_id}" in line for line in second_log):
        # The next try started before the trigger was cancelled and watches the job: it must not be killed.
        print("clear: the next try reattached to the running job")
        assert _terminations(batch, job_id) == []
        return
    # The trigger of try 1 ended its job; try 2 found it terminated and submitted the next one.
    first = batch_client.get_job(job_id)
    assert first.state == m.BatchJobState.COMPLETED
    assert first.execution_info.termination_reason == "AirflowTaskKilled"
    assert any(f"Batch job {job_id} is completed and did not succeed" in line for line in second_log)
    assert f"Deleting Batch job {job_id}-a2 (on_finish_action=delete_succeeded_job)" in second_log
    assert len(_terminations(batch, job_id)) == 1


def test_two_tasks_racing_for_one_shared_pool_create_it_once(cluster, batch_client):
    run_id = cluster.trigger("azbatch_shared_pool_race")
    cluster.wait_for_success("azbatch_shared_pool_race", run_id, timeout=180)
    assert [pool.id for pool in batch_client.list_pools() if pool.id == "race-pool"] == ["race-pool"]
    logs = cluster.task_log("azbatch_shared_pool_race", run_id, "first") + cluster.task_log(
        "azbatch_shared_pool_race", run_id, "second"
    )
    # Whoever lost the race found the pool the other one created, and said so.
    assert logs.count("Created shared pool race-pool (standard_f2s_v2)") == 1
    assert logs.count("Using shared pool race-pool") == 1


def _stored_trigger_kwargs(cluster) -> list[str]:
    from cryptography.fernet import Fernet

    fernet = Fernet(cluster.env["AIRFLOW__CORE__FERNET_KEY"].encode())
    with sqlite3.connect(cluster.home / "airflow.db") as db:
        rows = [row[0] for row in db.execute("SELECT kwargs FROM trigger")]
    return [row if row.startswith("{") else fernet.decrypt(row.encode()).decode() for row in rows]


def test_registry_password_is_nowhere_to_be_seen(cluster, batch_client):
    dag_id, task_id = "azbatch_registry_secret", "private_image"
    run_id = cluster.trigger(dag_id)
    wait_until(lambda: cluster.task_state(dag_id, run_id, task_id) == "deferred", timeout=120, interval=1)
    stored = wait_until(lambda: _stored_trigger_kwargs(cluster), timeout=30, what="the stored trigger")
    assert stored
    assert all(REGISTRY_PASSWORD not in kwargs for kwargs in stored)
    assert any(
        "container-pool" in kwargs or "private_image" in kwargs or "azbatch_registry_secret" in kwargs
        for kwargs in stored
    )
    cluster.wait_for_success(dag_id, run_id, timeout=180)
    log = cluster.task_log(dag_id, run_id, task_id)
    assert "[main] container step 12" in log
    assert not any(REGISTRY_PASSWORD in line for line in log)
    entries = cluster.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries")["xcom_entries"]
    assert entries
    for entry in entries:
        value = cluster.api(
            "GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/{entry['key']}"
        )
        assert REGISTRY_PASSWORD not in json.dumps(value)
    # The Batch service keeps the password to pull the image, but never returns it.
    job_id = default_job_id(dag_id, task_id, run_id, -1)
    task = batch_client.get_task(job_id, "main")
    assert task.container_settings.registry.registry_server == "registry.example.test"
    assert task.container_settings.registry.password is None
    assert REGISTRY_PASSWORD not in json.dumps(batch_client.get_pool("container-pool").as_dict())


def test_the_job_is_terminated_when_airflows_deferral_timeout_fires_first(cluster, batch_client):
    from azure.batch import models as m

    dag_id = "azbatch_deferral_timeout"
    run_id = cluster.trigger(dag_id)
    cluster.wait_for_run_end(dag_id, run_id, timeout=180)
    assert cluster.task_state(dag_id, run_id, "long") == "failed"
    job = batch_client.get_job(default_job_id(dag_id, "long", run_id, -1))
    assert job.state == m.BatchJobState.COMPLETED
    assert job.execution_info.termination_reason == "AirflowDeferralEnded"
    log = cluster.task_log(dag_id, run_id, "long")
    assert any("ended without an event: terminating the job" in line for line in log)


def test_the_connection_form_as_the_ui_receives_it_shows_no_null(cluster):
    hooks = cluster._request("GET", "/ui/connections/hook_meta")
    (azbatch,) = [hook for hook in hooks if hook.get("connection_type") == "azbatch"]
    fields = azbatch["extra_fields"]
    if not compat.CONNECTION_FORM_FIELDS:
        # Before 3.2 only hook classmethods shape the form, with flask_appbuilder: Airflow's generic form.
        assert not fields
        assert azbatch["standard_fields"] is None
        return
    choices = {name: spec["schema"].get("enum") for name, spec in fields.items() if spec["schema"].get("enum")}
    assert choices == {
        "auth_method": ["auto", "shared_key", "service_principal", "managed_identity", "workload_identity", "default"],
        "cloud": ["public", "us_government", "china", "custom"],
    }
    assert {name: fields[name]["value"] for name in choices} == {"auth_method": "auto", "cloud": "public"}
    assert fields["account_url"]["schema"]["type"] == "string"  # required in the form


def test_a_deferred_taskflow_function_returns_what_the_dag_branches_on(cluster):
    run_id = cluster.trigger("azbatch_taskflow")
    cluster.wait_for_run_end("azbatch_taskflow", run_id, timeout=240)
    states = {task: cluster.task_state("azbatch_taskflow", run_id, task) for task in ("evaluate", "ship", "stop")}
    log = cluster.task_log("azbatch_taskflow", run_id, "evaluate")
    assert states == {"evaluate": "success", "ship": "success", "stop": "skipped"}, "\n".join(log[-40:])
    # Its output streamed while deferred, each line once.
    assert [line for line in log if line.startswith("[main] evaluating step ")] == [
        f"[main] evaluating step {step}/8" for step in range(1, 9)
    ]
    assert cluster.xcom("azbatch_taskflow", run_id, "evaluate", "run") == run_id
    assert cluster.xcom("azbatch_taskflow", run_id, "ship") == "shipping with score 0.9"


def _openlineage_events(path: Path, job: str) -> list[dict]:
    lines = path.read_text().splitlines() if path.exists() else []
    return [event for line in lines if line.strip() and (event := json.loads(line))["job"]["name"] == job]


def test_an_asset_scheduled_dag_runs_once_per_training_run_with_its_job_and_metrics(
    cluster, storage, openlineage_events
):
    from azure.storage.blob import BlobServiceClient

    with BlobServiceClient(
        storage.url, credential={"account_name": storage.account, "account_key": storage.key}
    ) as blobs:
        container = blobs.get_container_client("lineage-in")
        if not container.exists():
            container.create_container()
        container.upload_blob("data/a.txt", b"one two three\n", overwrite=True)
    producer, consumer = "azbatch_lineage_training", "azbatch_lineage_evaluation"
    port = storage.url.rsplit(":", 1)[1].split("/")[0]
    outputs = f"wasb://lineage-out@127.0.0.1:{port}/{storage.account}"

    def evaluations() -> list[dict]:
        return cluster.api("GET", f"/dags/{consumer}/dagRuns?order_by=start_date&limit=100")["dag_runs"]

    seen: list[str] = []
    for number in (1, 2):
        run_id = cluster.trigger(producer)
        cluster.wait_for_success(producer, run_id, timeout=240)
        # One evaluation run per training run, started by the asset event, with the job and its metrics.
        runs = wait_until(
            lambda number=number: (
                [r for r in evaluations() if r["state"] in ("success", "failed")][number - 1 :] or None
            ),
            timeout=120,
            interval=1,
            what=f"evaluation run {number}",
        )
        (evaluation,) = runs
        assert evaluation["state"] == "success"
        assert evaluation["run_type"] == "asset_triggered"
        (event,) = cluster.xcom(consumer, evaluation["dag_run_id"], "evaluate")
        job_id = default_job_id(producer, "train", run_id, -1)
        path = f"models/{run_id.replace(':', '_').replace('+', '_')}"
        assert event["source_run_id"] == run_id
        assert event["job_id"] == job_id
        assert event["return_value"] == {"auc": 0.91, "rows": 3}
        assert event["blobs"] == [f"wasb://127.0.0.1:{port}/{storage.account}/lineage-out/{path}/weights.bin"]
        seen.append(job_id)
    assert len(evaluations()) == 2
    assert len(set(seen)) == 2

    # The OpenLineage provider's file transport: each training run started and completed, naming its Blob data and
    # its Batch job.
    inputs = f"wasb://lineage-in@127.0.0.1:{port}/{storage.account}"
    completes = wait_until(
        lambda: (
            [e for e in _openlineage_events(openlineage_events, f"{producer}.train") if e["eventType"] == "COMPLETE"]
            if len(seen) == 2
            else None
        ),
        timeout=60,
        interval=1,
        what="the COMPLETE events",
    )
    assert sorted(e["run"]["facets"]["azureBatchJob"]["jobId"] for e in completes) == sorted(seen)
    starts = [e for e in _openlineage_events(openlineage_events, f"{producer}.train") if e["eventType"] == "START"]
    assert starts
    for complete in completes:
        assert (inputs, "data") in {(d["namespace"], d["name"]) for d in complete["inputs"]}
        assert any(d["namespace"] == outputs and d["name"].startswith("models/") for d in complete["outputs"])
        assert complete["run"]["facets"]["azureBatchJob"]["exitCodes"] == {"main": 0}
        # The TaskFlow function is the job's source code.
        assert "def train()" in complete["job"]["facets"]["sourceCode"]["sourceCode"]


def _watcher_cursor(cluster: AirflowCluster) -> dict | None:
    """The example watcher's cursor (its Airflow Variable), once it wrote one."""
    variables = cluster.api("GET", "/variables?limit=100")["variables"]
    cursors = [v for v in variables if v["key"].startswith("azbatch_job_events.")]
    assert len(cursors) <= 1, cursors
    return json.loads(cursors[0]["value"]) if cursors else None


def test_a_watcher_scheduled_dag_runs_once_per_training_job_completed_outside_airflow(cluster, batch_client):
    """Jobs submitted with the SDK directly (as ``torchx run -s azure_batch`` does): each training job that succeeds
    starts the evaluation DAG once, with the job in the asset event; a failed one and another app's start none; a
    job that completes while the triggerer is stopped starts it once the triggerer is back, and none runs twice."""
    import uuid

    from azure.batch import models as m

    from tests.helpers import pool_options, sh

    batch_client.create_pool(pool_options("watched-pool", nodes=1))
    run = uuid.uuid4().hex[:6]

    def job(name: str, exit_code: int, app: str = "train") -> str:
        job_id = f"torchx-{name}-{run}"
        batch_client.create_job(
            m.BatchJobCreateOptions(
                id=job_id,
                pool_info=m.BatchPoolInfo(pool_id="watched-pool"),
                metadata=[m.BatchMetadataItem(name="torchx-app", value=app)],
            )
        )
        batch_client.create_task(job_id, m.BatchTaskCreateOptions(id="trainer-0", command_line=sh(f"exit {exit_code}")))
        batch_client.update_job(job_id, m.BatchJobUpdateOptions(all_tasks_complete_mode="terminatejob"))
        return job_id

    def completed(job_id: str) -> bool:
        return batch_client.get_job(job_id).state == m.BatchJobState.COMPLETED

    def evaluations() -> list[dict]:
        runs = cluster.api("GET", f"/dags/{WATCHER_DAG_ID}/dagRuns?order_by=start_date&limit=100")["dag_runs"]
        return [r for r in runs if r["state"] in ("success", "failed")]

    def evaluated_jobs(count: int) -> list[str]:
        runs = wait_until(
            lambda: found if len(found := evaluations()) >= count else None,
            timeout=180,
            interval=1,
            what=f"{count} evaluation runs",
        )
        jobs = []
        for evaluation in runs:
            assert evaluation["state"] == "success"
            assert evaluation["run_type"] == "asset_triggered"
            jobs += [
                payload["job_id"] for payload in cluster.xcom(WATCHER_DAG_ID, evaluation["dag_run_id"], "evaluate")
            ]
        return jobs

    def settled(job_id: str) -> bool:
        cursor = _watcher_cursor(cluster)
        return cursor is not None and job_id in cursor["fired"]

    # The watcher runs (the DAG processor registered it, a triggerer started it) once it saved its first cursor.
    wait_until(lambda: _watcher_cursor(cluster), timeout=180, interval=1, what="the watcher's first cursor")
    first = job("train", 0)
    failed = job("train-bad", 1)
    other = job("eval", 0, app="eval")
    wait_until(lambda: all(completed(j) for j in (first, failed, other)), timeout=60, what="the first jobs completed")
    assert evaluated_jobs(1) == [first]
    (evaluation,) = evaluations()
    (payload,) = cluster.xcom(WATCHER_DAG_ID, evaluation["dag_run_id"], "evaluate")
    assert payload["outcome"] == "succeeded"
    assert payload["exit_codes"] == {"trainer-0": 0}
    assert payload["metadata"] == {"torchx-app": "train"}
    assert payload["pool_id"] == "watched-pool"
    wait_until(lambda: settled(first), timeout=60, interval=1, what="the first job saved as fired")

    # A training job completes while no triggerer runs: it starts one run when the triggerer is back.
    cluster.stop_component("triggerer")
    while_stopped = job("train-while-stopped", 0)
    wait_until(lambda: completed(while_stopped), timeout=60, what="the job completed while the triggerer was stopped")
    cluster.start_triggerer("triggerer")
    assert evaluated_jobs(2) == [first, while_stopped]

    after = job("train-after", 0)
    assert evaluated_jobs(3) == [first, while_stopped, after]
    # Once the last one is saved as fired, every event of these jobs has reached Airflow: none ran twice.
    wait_until(lambda: settled(after), timeout=60, interval=1, what="the last job saved as fired")
    assert evaluated_jobs(3) == [first, while_stopped, after]
    assert len(evaluations()) == 3
