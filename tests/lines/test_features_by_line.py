"""What each Airflow line offers, as the provider detects it, matches the documentation's "Airflow lines" page
(docs/reference/airflow-lines.md), and each feature an older line lacks degrades the way that page says."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from airflow_provider_azbatch import compat, config

AIRFLOW_LINES_PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "airflow-lines.md"
LINE = ".".join(compat.AIRFLOW_VERSION.split(".")[:2])

# The page's row -> the flag that detects it on the running line.
DETECTED = {
    "The triggerer tells a trigger of a kill (`on_kill`)": compat.TRIGGER_ON_KILL,
    "A retry finds its job in the task state store": compat.TASK_STATE_STORE,
    "Output checkpoints: a triggerer restart repeats no line": compat.TRIGGER_XCOM,
    "The connection form shows the provider's fields": compat.CONNECTION_FORM_FIELDS,
    "`airflow azbatch` commands": compat.PROVIDER_CLI,
}
# What each line is known to have (the lines' source, and tests/airflow_run on each line).
EXPECTED = {
    "3.0": {"TRIGGER_ON_KILL": False, "TASK_STATE_STORE": False, "TRIGGER_XCOM": False, "PROVIDER_CLI": False},
    "3.1": {"TRIGGER_ON_KILL": False, "TASK_STATE_STORE": False, "TRIGGER_XCOM": False, "PROVIDER_CLI": False},
    "3.2": {"TRIGGER_ON_KILL": False, "TASK_STATE_STORE": False, "TRIGGER_XCOM": True, "PROVIDER_CLI": True},
    "3.3": {"TRIGGER_ON_KILL": True, "TASK_STATE_STORE": True, "TRIGGER_XCOM": True, "PROVIDER_CLI": True},
}


# The page's row -> the tests that exercise it, each run on every line (make compat-unit and make
# compat-deployment on 3.0-3.2, make test on 3.3) and failing if the feature broke on it. A row no test exercises
# on each line leaves the table.
RA = "tests/airflow_run/test_real_airflow.py::"
WHEN_TASKS_FAIL = "tests/provider/test_when_tasks_fail.py::"
TWO_TRIGGERERS = "tests/airflow_run/test_two_triggerers.py::"
EXERCISED = {
    "Jobs (sync and deferrable), live task output in the task log, reattach on retry, `[azbatch]` options": [
        f"{RA}test_output_streams_while_deferred_and_appears_once",
        "tests/provider/test_reattach_and_sensor.py::test_a_later_try_reattaches_to_the_running_job",
        "tests/lines/test_features_by_line.py::test_azbatch_options_are_read_on_every_line",
    ],
    'Per-Batch-task log sources (the log view\'s "Sources" filter)': [
        f"{RA}test_first_output_appears_within_a_poll_of_the_trigger_start",
    ],
    "`@task.azure_batch`, result files, exit conditions, fail-fast, skip codes, job preparation/release": [
        f"{RA}test_a_deferred_taskflow_function_returns_what_the_dag_branches_on",
        f"{WHEN_TASKS_FAIL}test_a_task_waiting_on_a_failed_task_ends_the_wait_naming_both",
        f"{WHEN_TASKS_FAIL}test_skip_on_exit_code_skips_the_airflow_task_and_a_mixed_failure_still_fails",
    ],
    "OpenLineage events of runs, the parent run in the Batch tasks' environment (7)": [
        "tests/lineage/test_openlineage_events.py::test_a_run_emits_start_and_complete_naming_its_blobs_and_fail_with_the_error",
    ],
    "Asset events of outputs, DAGs scheduled on them, the hook lineage collector (8)": [
        "tests/lineage/test_openlineage_events.py::test_a_run_emits_start_and_complete_naming_its_blobs_and_fail_with_the_error",
        f"{RA}test_an_asset_scheduled_dag_runs_once_per_training_run_with_its_job_and_metrics",
    ],
    "DAGs started by Batch jobs: the job watcher of asset watchers (`BaseEventTrigger`), each job once (9)": [
        f"{RA}test_a_watcher_scheduled_dag_runs_once_per_training_job_completed_outside_airflow",
        "tests/provider/test_job_events.py::test_each_job_fires_once_per_watcher_across_a_restart_beside_another_watcher",
    ],
    "`resumable_job.*` metrics (1)": [f"{RA}test_output_streams_while_deferred_and_appears_once"],
    "Killing a deferred task (marked failed or success, cleared) terminates its Batch job": [
        f"{RA}test_marking_a_deferred_task_failed_terminates_its_job",
        f"{RA}test_marking_a_deferred_task_success_terminates_its_job",
        f"{RA}test_clearing_a_deferred_task_ends_its_job_and_the_next_try_runs_one",
        "tests/provider/test_trigger_kill.py::test_a_trigger_cancelled_because_its_task_was_killed_terminates_its_job",
        "tests/provider/test_trigger_kill.py::test_a_trigger_cancelled_by_a_restart_or_a_handover_leaves_its_job",
        f"{TWO_TRIGGERERS}test_only_the_marked_task_terminates_its_job_once",
    ],
    "The triggerer tells a trigger of a kill (`on_kill`)": [
        "tests/provider/test_trigger_kill.py::test_on_3_3_a_cancellation_alone_asks_nothing_on_kill_does",
        "tests/lines/test_features_by_line.py::test_detected_features_are_the_lines_known_ones",
    ],
    "A retry finds its job in the task state store": [
        "tests/provider/test_reattach_and_sensor.py::test_a_later_try_reattaches_to_the_running_job",
        "tests/lines/test_features_by_line.py::test_detected_features_are_the_lines_known_ones",
    ],
    "Output checkpoints: a triggerer restart repeats no line": [f"{RA}test_a_triggerer_restart_loses_no_line"],
    "The connection form shows the provider's fields": [
        f"{RA}test_the_connection_form_as_the_ui_receives_it_shows_no_null",
        "tests/lines/test_features_by_line.py::test_the_connection_form_fields_are_registered_where_the_line_reads_them",
    ],
    "`airflow azbatch` commands": [
        "tests/lines/test_features_by_line.py::test_airflow_azbatch_is_a_command_where_the_line_reads_provider_commands",
    ],
    "The preflight check of a connection": [
        "tests/lines/test_features_by_line.py::test_the_preflight_check_runs_on_every_line",
    ],
}
MAKEFILE = Path(__file__).resolve().parents[2] / "Makefile"


def run_on_older_lines() -> list[str]:
    """What make compat-unit and make compat-deployment run on 3.0-3.2, as the Makefile lists them."""
    text = MAKEFILE.read_text(encoding="utf-8").replace("\\\n", " ")
    values = {}
    for name in ("REAL_AIRFLOW", "WHEN_TASKS_FAIL", "TWO_TRIGGERERS"):
        values[name] = re.search(rf"^{name} := (\S+)$", text, re.MULTILINE).group(1)
    entries = []
    for name in ("COMPAT_UNIT_TESTS ?=", "COMPAT_DEPLOYMENT_TESTS ?=", "COMPAT_UNIT_TESTS +="):
        for line in re.findall(rf"^{re.escape(name)}(.*)$", text, re.MULTILINE):
            for key, value in values.items():
                line = line.replace(f"$({key})", value)
            entries += [word.strip('"') for word in re.findall(r"[\w./\-\[\]:\"]+", line) if "tests" in word]
    return entries


def features_table() -> dict[str, dict[str, str]]:
    """The "Airflow lines" page's first table: feature -> {line: cell}."""
    text = AIRFLOW_LINES_PAGE.read_text(encoding="utf-8")
    first_table = text[text.index("\n| Feature |") + 1 :].split("\n\n", 1)[0]
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in first_table.splitlines()]
    header, _, *body = rows
    return {row[0]: dict(zip(header[1:], row[1:], strict=True)) for row in body}


def test_the_running_line_is_one_the_provider_supports():
    assert LINE in EXPECTED, (
        f"Airflow {compat.AIRFLOW_VERSION}: add its line to docs/reference/airflow-lines.md and to this test"
    )


def test_detected_features_are_the_lines_known_ones():
    detected = {name: getattr(compat, name) for name in EXPECTED[LINE]}
    assert detected == EXPECTED[LINE]
    assert compat.CONNECTION_FORM_FIELDS == compat.AIRFLOW_V_3_2_PLUS


def test_the_features_table_says_what_this_line_does():
    table = features_table()
    assert set(table) >= set(DETECTED)
    for feature, cells in table.items():
        cell = cells[LINE]
        assert re.match(r"^(yes|no)\b", cell), f"{feature!r} on {LINE}: {cell!r} says neither yes nor no"
        if feature in DETECTED:
            assert cell.startswith("yes") == DETECTED[feature], f"{feature!r} on {LINE}: {cell!r}"
        else:  # the rest holds on every line (and the tests that show it run on every line)
            assert cell.startswith("yes"), f"{feature!r} on {LINE}: {cell!r}"


def test_exceptions_are_the_classes_airflow_raises_on_this_line():
    names = ["AirflowException", "AirflowFailException", "AirflowNotFoundException", "AirflowSkipException"]
    names += ["AirflowTaskTimeout"]
    names += ["TaskDeferralError", "TaskDeferralTimeout"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # airflow.exceptions is the old home on 3.2+
        import airflow.exceptions as core

        raised = {name: getattr(core, name) for name in names}

    assert {name: getattr(compat, name) for name in names} == raised


def test_azbatch_options_are_read_on_every_line(monkeypatch):
    monkeypatch.setenv("AIRFLOW__AZBATCH__POLL_INTERVAL", "7.5")
    monkeypatch.setenv("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", "True")

    assert config.get_float("poll_interval") == 7.5
    assert compat.conf.getboolean("operators", "default_deferrable") is True


def test_the_connection_form_fields_are_registered_where_the_line_reads_them():
    from airflow.providers_manager import ProvidersManager

    manager = ProvidersManager()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 3.3 moves the hooks' registry to the task SDK's providers manager
        widgets = {key for key in manager.connection_form_widgets if key.startswith("extra__azbatch__")}
        behaviours = manager.field_behaviours
        hooks = manager.hooks
    if compat.CONNECTION_FORM_FIELDS:
        assert {"extra__azbatch__account_url", "extra__azbatch__auth_method"} <= widgets
        assert behaviours["azbatch"]["hidden_fields"] == ["schema", "port", "host"]
    else:  # the form is Airflow's generic one; the settings go in Extra
        assert widgets == set()
        assert "azbatch" not in behaviours
    assert hooks["azbatch"] is not None  # the connection type exists on every line


def test_airflow_azbatch_is_a_command_where_the_line_reads_provider_commands():
    airflow = str(Path(sys.executable).with_name("airflow"))
    done = subprocess.run([airflow, "azbatch", "--help"], capture_output=True, text=True, timeout=120)

    if compat.PROVIDER_CLI:
        assert done.returncode == 0, done.stderr
        assert "Usage: airflow azbatch [-h] COMMAND ..." in done.stdout
    else:
        assert done.returncode == 2
        assert "invalid choice: 'azbatch'" in done.stderr


def test_the_preflight_check_runs_on_every_line(local_batch_service, monkeypatch):
    """``python -m airflow_provider_azbatch.preflight`` (``airflow azbatch check`` where the line reads provider
    commands): the connection read, the data plane used, a DAG file's pool parsed as this line's DAG processor does."""
    from tests.airflow_helpers import azbatch_connection_json

    dag_file = Path(__file__).resolve().parents[1] / "preflight" / "dags" / "scoring.py"
    env = {name: value for name, value in os.environ.items() if name != "AIRFLOW__CORE__UNIT_TEST_MODE"}
    env["AIRFLOW_CONN_AZBATCH_LINE"] = azbatch_connection_json(local_batch_service)
    command = [sys.executable, "-m", "airflow_provider_azbatch.preflight", "--conn-id", "azbatch_line"]
    done = subprocess.run(
        [*command, "--dag-file", str(dag_file), "-o", "json"], env=env, capture_output=True, text=True, timeout=180
    )

    # No storage account, which the DAG's @task.azure_batch needs: not ready.
    assert done.returncode == 1, done.stderr
    statuses = {f["check"]: f["status"] for f in json.loads(done.stdout)["findings"]}
    cpu = "pool[preflight_scoring.score, preflight_scoring.shards]"
    assert {name: statuses[name] for name in ("dag_file", "batch.create_job", "storage.account", f"{cpu}.image")} == {
        "dag_file": "ok",
        "batch.create_job": "ok",
        "storage.account": "failed",
        f"{cpu}.image": "ok",
    }
    assert statuses["pool[preflight_scoring.report].exists"] == "failed"  # no such pool in this account


@pytest.mark.skipif(compat.TRIGGER_XCOM, reason="this line gives triggers XCom")
def test_without_trigger_xcom_a_checkpoint_is_refused_at_once():
    where = {"dag_id": "d", "task_id": "t", "run_id": "r", "map_index": -1}

    with pytest.raises(compat.TriggerXComUnavailable, match=r"gives triggers no XCom \(3.2\+ does\)"):
        asyncio.run(compat.aset_xcom("azbatch_watch_state", {}, **where))
    with pytest.raises(compat.TriggerXComUnavailable):
        asyncio.run(compat.aget_xcom("azbatch_watch_state", **where))


def test_each_row_of_the_table_is_exercised_on_every_line_by_a_collected_test():
    table = features_table()
    assert set(EXERCISED) == set(table), (
        "a row of airflow-lines.md names no test that exercises it (or a test maps no row)"
    )
    older = run_on_older_lines()
    node_ids = sorted({node for nodes in EXERCISED.values() for node in nodes})
    for node in node_ids:
        assert any(
            node == e or node.startswith(e.rstrip("/") + ("::" if ".py" in e else "/")) or e.startswith(f"{node}[")
            for e in older
        ), f"{node} does not run on 3.0-3.2: add it to COMPAT_UNIT_TESTS or COMPAT_DEPLOYMENT_TESTS in the Makefile"
    root = MAKEFILE.parent
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:randomly", *node_ids],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    collected = {line.split("[", 1)[0] for line in done.stdout.splitlines() if "::" in line}
    assert set(node_ids) <= collected, sorted(set(node_ids) - collected)
