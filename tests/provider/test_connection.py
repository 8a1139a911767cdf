"""The azbatch connection: registration, form metadata, and precise connection tests."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_provider_azbatch.hooks.batch import AzureBatchHook
from tests.airflow_helpers import azbatch_connection_json

WRONG_KEY = "QkFEQkFEQkFEQkFEQkFEQkFEQkFEQkFEQkFEQkFEQkE="


def _airflow(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    airflow = str(Path(sys.executable).with_name("airflow"))
    return subprocess.run(
        [airflow, *args], env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=120
    )


def test_airflow_lists_the_provider_and_its_hook():
    listed = _airflow("providers", "list")
    assert listed.returncode == 0
    assert "airflow-provider-azbatch" in listed.stdout
    hooks = _airflow("providers", "hooks")
    row = next(line for line in hooks.stdout.splitlines() if line.startswith("azbatch "))
    assert "airflow_provider_azbatch.hooks.batch.AzureBatchHook" in row
    assert "azbatch_conn_id" in row


def test_connection_form_shows_our_fields_with_secrets_as_passwords():
    from airflow.api_fastapi.core_api.services.ui.connections import HookMetaService

    meta = next(item for item in HookMetaService.hook_meta_data() if item.connection_type == "azbatch")
    fields = dict(meta.extra_fields)
    assert {"account_url", "auth_method", "tenant_id", "client_id", "client_secret", "cloud", "ca_bundle"} <= set(
        fields
    )
    assert fields["client_secret"]["schema"]["format"] == "password"
    assert fields["client_certificate_password"]["schema"]["format"] == "password"
    assert "format" not in fields["account_url"]["schema"]
    assert fields["client_secret"]["schema"]["title"] == "Client secret"
    assert meta.standard_fields.login.title == "Batch account name"
    assert meta.standard_fields.password.title == "Batch account key (shared key)"
    assert meta.standard_fields.host.hidden is True


def test_airflow_connections_test_reports_success_and_a_wrong_key(local_batch_service):
    enabled = {"AIRFLOW__CORE__TEST_CONNECTION": "Enabled"}
    good = _airflow(
        "connections",
        "test",
        "azbatch_cli",
        env={**enabled, "AIRFLOW_CONN_AZBATCH_CLI": azbatch_connection_json(local_batch_service)},
    )
    assert good.returncode == 0, good.stdout + good.stderr
    assert "Connection success!" in good.stdout
    conn = json.loads(azbatch_connection_json(local_batch_service))
    conn["password"] = WRONG_KEY
    bad = _airflow("connections", "test", "azbatch_cli", env={**enabled, "AIRFLOW_CONN_AZBATCH_CLI": json.dumps(conn)})
    assert bad.returncode == 1
    # the CLI wraps long lines to the terminal width
    assert (
        "Connection failed! AuthenticationFailed: Server failed to authenticate the request. Make sure the value of "
        "Authorization header is formed correctly including the signature. (The MAC signature found in the HTTP "
        "request is not the same as any computed signature.)"
    ) in " ".join(bad.stdout.split())


def _test(monkeypatch, conn: dict) -> tuple[bool, str]:
    monkeypatch.setenv("AIRFLOW_CONN_AZBATCH_T", json.dumps(conn))
    return AzureBatchHook("azbatch_t").test_connection()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            lambda c: c["extra"].pop("account_url"),
            "account_url is missing: set the Batch account URL, e.g. https://<account>.<region>.batch.azure.com",
        ),
        (
            lambda c: c["extra"].update(account_url="batch.example.com"),
            "account_url is not a valid URL ('batch.example.com'): it must look like "
            "https://<account>.<region>.batch.azure.com",
        ),
        (
            lambda c: c.pop("login"),
            "login (Batch account name) is missing: shared_key authentication needs it",
        ),
        (
            lambda c: c.update(password="not base64!"),
            "password (Batch account key) is not base64: paste the key as the Azure portal shows it",
        ),
    ],
)
def test_test_connection_names_the_bad_field(local_batch_service, monkeypatch, change, expected):
    conn = json.loads(azbatch_connection_json(local_batch_service))
    change(conn)
    assert _test(monkeypatch, conn) == (False, expected)


def test_test_connection_unreachable_host(local_batch_service, monkeypatch):
    conn = json.loads(azbatch_connection_json(local_batch_service))
    port = _free_port()
    conn["extra"]["account_url"] = f"http://127.0.0.1:{port}"
    ok, message = _test(monkeypatch, conn)
    assert not ok
    assert message.startswith(f"Cannot reach http://127.0.0.1:{port}: ")
    assert "Connection refused" in message


def test_test_connection_ok_names_the_account(local_batch_service, monkeypatch):
    conn = json.loads(azbatch_connection_json(local_batch_service))
    assert _test(monkeypatch, conn) == (
        True,
        f"Connected to Batch account 'devbatchaccount1' at {local_batch_service.url} (shared_key)",
    )
