"""Which Batch account: two side by side by one option, one given without any Airflow set-up, and bad input
refused before anything is submitted."""

from __future__ import annotations

import configparser
import json
from pathlib import Path

import pytest

from local_azure_batch.testing import run_local_batch_service
from tests.helpers import wait_until
from tests.torchx import commands
from tests.torchx.commands import argv
from tests.torchx.conftest import job_of

SECOND_KEY = "c2Vjb25kIGFjY291bnQga2V5IGZvciB0aGUgdG9yY2h4IHRlc3Rz"
# The account in .torchxconfig, as docs/howto/torchx.md shows it.
ACCOUNT_CONFIG = Path(__file__).resolve().parents[2] / "docs" / "examples" / "torchxconfig_account.ini"


def _the_documented_config_on(batch_url: str, account_name: str, storage_url: str) -> str:
    """The page's .torchxconfig with this machine's account and storage in place of Azure's."""
    config = configparser.ConfigParser()
    config.read_string(ACCOUNT_CONFIG.read_text(encoding="utf-8"))
    assert set(config["azure_batch"]) == {"account_url", "storage_account_url"}
    config["azure_batch"]["account_url"] = batch_url
    config["azure_batch"]["storage_account_url"] = storage_url
    # A loopback URL names no account: a Batch account's URL (https://<name>.<region>.batch.azure.com) does.
    config["azure_batch"]["account_name"] = account_name
    lines: list[str] = []
    for section in config.sections():
        lines += [f"[{section}]", *(f"{key} = {value}" for key, value in config[section].items())]
    return "\n".join(lines) + "\n"


@pytest.mark.azurite
def test_two_accounts_side_by_side_by_one_option_one_of_them_without_airflow(torchx, workdir, tmp_path, azurite):
    from azure.batch import BatchClient
    from azure.core.credentials import AzureNamedKeyCredential

    with run_local_batch_service(account_name="secondaccount", account_key=SECOND_KEY) as second:
        client = BatchClient(second.url, AzureNamedKeyCredential("secondaccount", SECOND_KEY))
        connection = {"conn_type": "azbatch", "login": "secondaccount", "password": SECOND_KEY}
        # With a storage account, which ships the workspace (the current directory, torchx's default).
        storage = {"storage_account_url": azurite.url, "storage_account_key": azurite.key}
        env = {"AIRFLOW_CONN_RESEARCH": json.dumps({**connection, "extra": {"account_url": second.url, **storage}})}
        by_connection = torchx(*argv(commands.OTHER_ACCOUNT), env=env)
        assert by_connection.code == 0, by_connection.err
        assert by_connection.handle.startswith("azure_batch://torchx/research:torchx-echo-")
        assert client.get_job(job_of(by_connection.handle)).id == job_of(by_connection.handle)

        # No Airflow connection, no Airflow home: the account and its storage from the page's .torchxconfig,
        # their keys from the environment. Nothing is written where Airflow keeps its files.
        (workdir / ".torchxconfig").write_text(_the_documented_config_on(second.url, "secondaccount", azurite.url))
        home = tmp_path / "airflow-home"
        home.mkdir()
        direct_env = {"AIRFLOW_HOME": str(home), "AZURE_BATCH_ACCESS_KEY": SECOND_KEY, "AZURE_STORAGE_KEY": azurite.key}
        direct = torchx("run", "-s", "azure_batch", "utils.echo", "--msg", "direct", env=direct_env)
        assert direct.code == 0, direct.err
        host = second.url.split("://", 1)[1]
        assert direct.handle.startswith(f"azure_batch://torchx/http@{host}:torchx-echo-")
        wait_until(
            lambda: client.get_job(job_of(direct.handle)).state == "completed", timeout=120, what="the direct app"
        )
        status = json.loads(torchx("status", "--json", direct.handle, env=direct_env).out)
        assert status["state"] == "SUCCEEDED"
        # The app's pool went with it: its output was kept in the storage account of .torchxconfig.
        log = torchx(*argv(commands.LOG, direct.handle), env=direct_env)
        assert log.code == 0, log.err
        assert log.out.splitlines()[0] == "echo/0 direct"
        assert list(home.iterdir()) == []
        client.close()


def test_bad_input_is_refused_before_anything_is_submitted(torchx, airflow_db, azbatch_default, batch_client):
    before = {job.id for job in batch_client.list_jobs()}

    unknown = torchx("run", "-s", "azure_batch", "-cfg", "colour=red", "utils.echo")
    assert unknown.code != 0
    assert "colour" in unknown.err

    huge = torchx("run", "-s", "azure_batch", "utils.sh", "--cpu", "100000", "true")
    assert huge.code != 0
    assert "role 'sh' resource (cpu=100000, memMB=1024, gpu=0) cannot run on Azure Batch" in huge.err
    assert "-cfg vm_size=" in huge.err

    missing = torchx("run", "-s", "azure_batch", "-cfg", "conn_id=nowhere", "utils.echo")
    assert missing.code != 0
    assert (
        "azure_batch run option `conn_id` names the Airflow connection 'nowhere', which does not exist: create it"
    ) in missing.err

    assert {job.id for job in batch_client.list_jobs()} == before
