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
