"""``airflow azbatch check`` and ``python -m airflow_provider_azbatch.preflight``: the report as text or JSON, and
the exit codes (0 ready, 1 not ready or, with --strict, unknown, 2 wrong arguments)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from tests.airflow_helpers import azbatch_connection_json

WRONG_KEY = "d3Jvbmcta2V5LW9mLWFub3RoZXItYWNjb3VudA=="


@pytest.fixture
def with_storage(local_batch_service, azurite, monkeypatch):
    connection = azbatch_connection_json(
        local_batch_service, storage_account_url=azurite.url, storage_account_key=azurite.key
    )
    monkeypatch.setenv("AIRFLOW_CONN_AZBATCH_CHECK", connection)
    return local_batch_service


def _job(text: str) -> str:
    return re.sub(r"azbatch-check-[0-9a-f]{8}", "azbatch-check-<id>", text)


def test_the_text_report_of_a_ready_connection(with_storage, azurite, cli):
    service = with_storage
    result = cli("check", "--conn-id", "azbatch_check", "--requirements", '{"cpus": 2}', "--max-nodes", "2")

    assert result.code == 0, result.err
    assert _job(result.out).splitlines() == [
        f"Preflight of connection 'azbatch_check': Batch account 'devbatchaccount1' at {service.url}",
        "Identity: the shared key of Batch account 'devbatchaccount1'",
        "",
        f"ok       connection: connection 'azbatch_check': shared_key to Batch account 'devbatchaccount1' at "
        f"{service.url}",
        "ok       authentication: Batch account 'devbatchaccount1' accepts the connection's shared key",
        "ok       batch.list_jobs: jobs can be listed",
        "ok       batch.create_job: job azbatch-check-<id> created (on no pool: nothing runs)",
        "ok       batch.delete_job: job azbatch-check-<id> deleted",
        f"ok       storage.account: storage account 'devstoreaccount1' at {azurite.url}",
        "ok       storage.container: container azbatch-check-<id> created",
        "ok       storage.blob: blob azbatch-check-<id>/azbatch-check.txt written and read back",
        "ok       storage.sas: a SAS signed with the account key reads the blob (tasks get such SAS)",
        "unknown  management.account: the Batch account's quotas and region could not be read: a shared key does not "
        "reach Resource Manager, where the quotas and the region's VM sizes are",
        "         fix: check again with --management-credential default (DefaultAzureCredential: az login, a managed "
        "identity, AZURE_* variables), or with an Entra ID connection",
        "ok       pool[--requirements].image: image canonical:ubuntu-24_04-lts:server is offered (verified, node agent "
        "batch.node.ubuntu 24.04)",
        "unknown  pool[--requirements].vm_size: whether standard_f2s_v2 is offered in the account's region is unknown",
        "         fix: check again with --management-credential default (DefaultAzureCredential: az login, a managed "
        "identity, AZURE_* variables), or with an Entra ID connection",
        "unknown  pool[--requirements].quota: the account's vCPU quota could not be read",
        "         fix: check again with --management-credential default (DefaultAzureCredential: az login, a managed "
        "identity, AZURE_* variables), or with an Entra ID connection",
        "",
        "Ready: 10 ok, 3 unknown (exit 0)",
    ]
    strict = cli("check", "--conn-id", "azbatch_check", "--requirements", '{"cpus": 2}', "--strict")
    assert strict.code == 1
    assert strict.lines[-1] == "Not ready: 10 ok, 3 unknown (exit 1)"


def test_json_for_scripts_and_exit_1_when_not_ready(local_batch_service, azurite, monkeypatch, cli):
    connection = json.loads(azbatch_connection_json(local_batch_service))
    connection["password"] = WRONG_KEY
    monkeypatch.setenv("AIRFLOW_CONN_AZBATCH_CHECK", json.dumps(connection))

    result = cli("check", "--conn-id", "azbatch_check", "--no-dags", "--output", "json")

    assert result.code == 1
    report = json.loads(result.out)
    assert (report["conn_id"], report["account_name"], report["ok"]) == ("azbatch_check", "devbatchaccount1", False)
    assert report["identity"]["kind"] == "shared_key"
    assert report["counts"] == {"ok": 1, "failed": 1, "warning": 1, "unknown": 0}
    assert [(f["check"], f["status"]) for f in report["findings"]] == [
        ("connection", "ok"),
        ("authentication", "failed"),
        ("storage.account", "warning"),
    ]
    assert report["findings"][1]["fix"].startswith("set login to the Batch account's name and password to one of")
    assert WRONG_KEY not in result.out


def test_wrong_arguments_exit_2(azbatch_default, cli):
    not_json = cli("check", "--requirements", "{cpus: 2}")
    unknown_key = cli("check", "--requirements", '{"gpu": 1}')

    assert (not_json.code, not_json.out) == (2, "")
    assert not_json.error.startswith("--requirements is not JSON (Expecting property name enclosed in double quotes)")
    assert unknown_key.code == 2
    assert unknown_key.error.startswith("--requirements/--vm-size: requirements has unknown key(s) 'gpu'")


def test_airflow_azbatch_check_and_python_m_run_as_a_user_runs_them(with_storage, airflow_cli):
    command = airflow_cli("check", "--conn-id", "azbatch_check", "--no-dags", "-o", "json")
    env = {k: v for k, v in os.environ.items() if k != "AIRFLOW__CORE__UNIT_TEST_MODE"}
    module = subprocess.run(
        [
            sys.executable,
            "-m",
            "airflow_provider_azbatch.preflight",
            "--conn-id",
            "azbatch_check",
            "--no-dags",
            "--strict",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert command.code == 0, command.err
    assert [f["status"] for f in json.loads(command.out)["findings"]] == ["ok"] * 9
    assert module.returncode == 0, module.stderr
    assert module.stdout.splitlines()[-1] == "Ready: 9 ok (exit 0)"
    assert "Traceback" not in command.err + module.stderr
