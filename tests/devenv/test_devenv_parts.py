"""The parts of `azbatch-dev` that need no process: finding Azurite, the state directory, the settings."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from airflow_provider_azbatch.devenv import cli
from airflow_provider_azbatch.devenv.airflow_home import BatchEndpoint, airflow_settings, connection_json, export_lines
from airflow_provider_azbatch.devenv.errors import DevEnvError
from airflow_provider_azbatch.devenv.storage import AZURITE_VERSION, Azurite, find_azurite

ROOT = Path(__file__).resolve().parents[2]


def _executable(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_the_pinned_azurite_is_the_repositorys():
    lock = json.loads((ROOT / "package-lock.json").read_text())
    assert lock["packages"]["node_modules/azurite"]["version"] == AZURITE_VERSION


def test_azurite_is_found_in_node_modules_then_on_path_then_run_by_npx(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    _executable(bin_dir, "node")
    npx = _executable(bin_dir, "npx")
    monkeypatch.setenv("PATH", str(bin_dir))
    project = tmp_path / "project"
    assert find_azurite(None, [project]) == (
        [str(npx), "--yes", "--package", f"azurite@{AZURITE_VERSION}", "azurite-blob"],
        f"npx azurite@{AZURITE_VERSION}",
    )
    global_azurite = _executable(bin_dir, "azurite-blob")
    assert find_azurite(None, [project]) == ([str(global_azurite)], str(global_azurite))
    local = _executable(project / "node_modules" / ".bin", "azurite-blob")
    assert find_azurite(None, [project]) == ([str(local)], str(local))
    assert find_azurite("/opt/azurite-blob", [project]) == (["/opt/azurite-blob"], "/opt/azurite-blob")


def test_without_node_there_is_no_azurite_even_in_node_modules(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    _executable(tmp_path / "node_modules" / ".bin", "azurite-blob")
    assert find_azurite(None, [tmp_path]) is None


def test_a_state_dir_the_command_did_not_make_is_never_emptied(tmp_path):
    precious = tmp_path / "notes.txt"
    precious.write_text("mine")
    with pytest.raises(DevEnvError, match="holds files azbatch-dev did not write: give a new or empty folder"):
        cli._prepare_state(tmp_path, persist=False)
    assert precious.read_text() == "mine"


def test_the_state_dir_starts_empty_unless_persisted(tmp_path):
    state = tmp_path / "state"
    cli._prepare_state(state, persist=False)
    (state / "airflow").mkdir()
    cli._prepare_state(state, persist=True)
    assert (state / "airflow").is_dir()
    cli._prepare_state(state, persist=False)
    assert not (state / "airflow").exists()


def test_the_export_lines_give_another_shell_the_same_environment(tmp_path):
    batch = BatchEndpoint("http://127.0.0.1:1234", "devbatchaccount1", "a2V5")
    storage = Azurite(url="http://127.0.0.1:5678/devstoreaccount1", source="azurite-blob")
    settings = airflow_settings(tmp_path / "home", tmp_path / "my dags", connection_json(batch, storage), 8080)
    exported = {}
    for line in export_lines(settings):
        name, value = shlex.split(line.removeprefix("export "))[0].split("=", 1)
        exported[name] = value
    assert exported == settings
    assert exported["AIRFLOW__CORE__DAGS_FOLDER"] == str(tmp_path / "my dags")
    assert json.loads(exported["AIRFLOW_CONN_AZBATCH_DEFAULT"]) == {
        "conn_type": "azbatch",
        "login": "devbatchaccount1",
        "password": "a2V5",
        "extra": {
            "account_url": "http://127.0.0.1:1234",
            "storage_account_url": "http://127.0.0.1:5678/devstoreaccount1",
            "storage_account_key": storage.key,
        },
    }
    # Airflow's own secrets stay in the home's airflow.cfg: never printed.
    assert not [name for name in exported if "SECRET" in name or "FERNET" in name]


def test_a_missing_dags_folder_is_named_with_the_fix(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["test", "my_dag", "nowhere"]) == 1
    assert capsys.readouterr().err == (
        f"azbatch-dev: DAGS_FOLDER {tmp_path / 'nowhere'} is not a folder: give the folder that holds your DAG "
        "files (azbatch-dev test DAG_ID path/to/dags)\n"
    )
