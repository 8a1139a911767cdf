"""``torchx`` command lines that never import Airflow: the account given by a connection an ``AIRFLOW_CONN_<ID>``
variable holds (JSON or URI) or by URL; a connection from a secrets backend still works (through Airflow).

Each command runs as a user runs it (a subprocess), under ``python -X importtime``, which lists every module the
process imported: none may be Airflow's."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote, urlencode

import pytest

from airflow_provider_azbatch import airflowless
from tests.helpers import wait_until
from tests.torchx.conftest import job_of

pytest.importorskip("torchx", reason="the [torchx] extra is not installed")

# `-X importtime` writes a line per module: "import time: <self us> | <cumulative us> | <indented name>".
IMPORTED = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|\s+(?P<module>\S+)\s*$")


def imported_airflow(stderr: str) -> list[str]:
    modules = [match["module"] for line in stderr.splitlines() if (match := IMPORTED.match(line))]
    assert modules, "no -X importtime lines: the check would pass vacuously"
    return [module for module in modules if module == "airflow" or module.startswith("airflow.")]


def torchx_importtime(workdir: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "torchx.cli.main", *args],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.azurite
def test_run_status_describe_log_list_and_cancel_never_import_airflow(
    workdir, local_batch_service, batch_client, azurite
):
    service = local_batch_service
    # With a storage account: the workspace (the current directory) is staged, the output kept.
    storage = {"storage_account_url": azurite.url, "storage_account_key": azurite.key}
    connection = {
        "conn_type": "azbatch",
        "login": service.account_name,
        "password": service.account_key,
        "extra": {"account_url": service.url, **storage},
    }
    base = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW_CONN_")}
    as_json = {**base, "AIRFLOW_CONN_AZBATCH_DEFAULT": json.dumps(connection)}
    query = urlencode({"account_url": service.url, **storage})
    uri = f"azbatch://{service.account_name}:{quote(service.account_key, safe='')}@/?{query}"
    as_uri = {**base, "AIRFLOW_CONN_AZBATCH_DEFAULT": uri}

    (workdir / "note.txt").write_text("shipped\n", encoding="utf-8")
    run = torchx_importtime(
        workdir, "run", "-s", "azure_batch", "utils.sh", "sh", "-c", "cat note.txt; echo ready; sleep 60",
        env=as_json,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert imported_airflow(run.stderr) == []
    handle = run.stdout.strip()
    assert handle.startswith("azure_batch://torchx/azbatch_default:torchx-sh-")

    def logged() -> str | bool:
        log = torchx_importtime(workdir, "log", "--streams", "stdout", handle, env=as_uri)
        lines = log.stdout.splitlines()
        # The workspace reached the node: its file is printed before "ready".
        return log.returncode == 0 and lines[:2] == ["sh/0 shipped", "sh/0 ready"] and log.stderr

    assert imported_airflow(wait_until(logged, timeout=120, interval=0.5, what="the app's first line")) == []

    status = torchx_importtime(workdir, "status", "--json", handle, env=as_uri)
    assert status.returncode == 0, status.stderr[-3000:]
    assert json.loads(status.stdout)["state"] == "RUNNING"
    assert imported_airflow(status.stderr) == []

    described = torchx_importtime(workdir, "describe", handle, env=as_json)
    assert described.returncode == 0, described.stderr[-3000:]
    assert "'entrypoint': 'sh'" in described.stdout
    assert imported_airflow(described.stderr) == []

    listed = torchx_importtime(workdir, "list", "-s", "azure_batch", env=as_json)
    assert listed.returncode == 0, listed.stderr[-3000:]
    assert [line.split()[0] for line in listed.stdout.splitlines() if handle in line] == [handle]
    assert imported_airflow(listed.stderr) == []

    cancelled = torchx_importtime(workdir, "cancel", handle, env=as_json)
    assert cancelled.returncode == 0, cancelled.stderr[-3000:]
    assert imported_airflow(cancelled.stderr) == []
    wait_until(lambda: batch_client.get_job(job_of(handle)).state == "completed", timeout=60, what="the app ended")


def test_an_account_by_url_never_imports_airflow(workdir, local_batch_service):
    service = local_batch_service
    (workdir / ".torchxconfig").write_text(
        f"[azure_batch]\naccount_url = {service.url}\naccount_name = {service.account_name}\n", encoding="utf-8"
    )
    env = {**os.environ, "AZURE_BATCH_ACCESS_KEY": service.account_key}
    run = torchx_importtime(workdir, "run", "-s", "azure_batch", "--workspace", "", "utils.echo", env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    assert imported_airflow(run.stderr) == []
    status = torchx_importtime(workdir, "status", run.stdout.strip(), env=env)
    assert status.returncode == 0, status.stderr[-3000:]
    assert "State:" in status.stdout
    assert imported_airflow(status.stderr) == []


def test_a_connection_from_a_secrets_backend_is_read_through_airflow(workdir, local_batch_service, tmp_path):
    service = local_batch_service
    connections = tmp_path / "connections.json"
    connections.write_text(
        json.dumps(
            {
                "azbatch_default": {
                    "conn_type": "azbatch",
                    "login": service.account_name,
                    "password": service.account_key,
                    "extra": {"account_url": service.url},
                }
            }
        ),
        encoding="utf-8",
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW_CONN_")}
    env["AIRFLOW__SECRETS__BACKEND"] = "airflow.secrets.local_filesystem.LocalFilesystemBackend"
    env["AIRFLOW__SECRETS__BACKEND_KWARGS"] = json.dumps({"connections_file_path": str(connections)})
    run = torchx_importtime(workdir, "run", "-s", "azure_batch", "--workspace", "", "utils.echo", env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip().startswith("azure_batch://torchx/azbatch_default:torchx-echo-")
    assert imported_airflow(run.stderr)  # the only place the connection is: Airflow's secrets backend
    status = torchx_importtime(workdir, "status", run.stdout.strip(), env=env)
    assert status.returncode == 0, status.stderr[-3000:]
    assert "State:" in status.stdout


# -- the environment's connection, read as Airflow reads it ----------------------------------------------------
KEY = "PwGE/BL0d3U4+tOFq=="
CASES = {
    "json, extra an object": json.dumps(
        {
            "conn_type": "azbatch",
            "login": "acct",
            "password": KEY,
            "extra": {"account_url": "https://a.b.batch.azure.com"},
        }
    ),
    "json, extra a string, a port": json.dumps(
        {"conn_type": "az-batch", "host": "h", "port": "8443", "extra": json.dumps({"x": 1})}
    ),
    "uri, extra in the query": f"azbatch://acct:{quote(KEY, safe='')}@/?account_url=https%3A%2F%2Fa.b.batch.azure.com",
    "uri, __extra__": "azbatch://acct:pw@/?__extra__=" + quote(json.dumps({"account_url": "https://x", "n": [1]})),
    "uri, host with its scheme, quoted": "azbatch://acct:pw@https%3A%2F%2FA.b.batch.azure.com:443/schema",
    "uri, host with its scheme, plain": "azbatch://https://a.b.batch.azure.com",
    "uri, a path in the host": "azbatch://user@host%2Fwith%2Fpath:123/db?k=v",
}


@pytest.mark.parametrize("value", CASES.values(), ids=CASES.keys())
def test_a_connection_in_the_environment_is_read_as_airflow_reads_it(value, monkeypatch):
    from airflow.sdk.definitions.connection import Connection

    monkeypatch.delenv(airflowless.SECRETS_BACKEND_ENV, raising=False)
    monkeypatch.setenv("AIRFLOW_CONN_SOME_ACCOUNT", value)
    ours = airflowless.env_connection("some_account")
    assert ours is not None
    read = Connection.from_json if value.startswith("{") else Connection.from_uri
    theirs = read(value, "some_account")
    fields = ("conn_type", "host", "schema", "login", "password", "port", "extra_dejson")
    assert {f: getattr(ours, f) for f in fields} == {f: getattr(theirs, f) for f in fields}


def test_with_a_secrets_backend_or_without_the_variable_the_environment_holds_no_connection(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_SOME_ACCOUNT", "azbatch://acct:pw@/")
    monkeypatch.setenv(airflowless.SECRETS_BACKEND_ENV, "my.Backend")
    assert airflowless.env_connection("some_account") is None
    monkeypatch.delenv(airflowless.SECRETS_BACKEND_ENV)
    assert airflowless.env_connection("other") is None
    monkeypatch.setenv("AIRFLOW_CONN_BROKEN", "not a connection")
    with pytest.raises(airflowless.ConnectionFormatError, match="AIRFLOW_CONN_BROKEN is neither connection JSON"):
        airflowless.env_connection("broken")
