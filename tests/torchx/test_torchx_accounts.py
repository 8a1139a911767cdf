"""Which Batch account: two side by side by one option, one given without any Airflow set-up, and bad input
refused before anything is submitted."""

from __future__ import annotations

import json

from local_azure_batch.testing import run_local_batch_service
from tests.helpers import wait_until
from tests.torchx.conftest import job_of

SECOND_KEY = "c2Vjb25kIGFjY291bnQga2V5IGZvciB0aGUgdG9yY2h4IHRlc3Rz"


def test_two_accounts_side_by_side_by_one_option_one_of_them_without_airflow(torchx, workdir, tmp_path):
    from azure.batch import BatchClient
    from azure.core.credentials import AzureNamedKeyCredential

    with run_local_batch_service(account_name="secondaccount", account_key=SECOND_KEY) as second:
        client = BatchClient(second.url, AzureNamedKeyCredential("secondaccount", SECOND_KEY))
        connection = {"conn_type": "azbatch", "login": "secondaccount", "password": SECOND_KEY}
        env = {"AIRFLOW_CONN_SECOND": json.dumps({**connection, "extra": {"account_url": second.url}})}
        by_connection = torchx(
            "run", "-s", "azure_batch", "-cfg", "conn_id=second", "utils.echo", "--msg", "hi", env=env
        )
        assert by_connection.code == 0, by_connection.err
        assert by_connection.handle.startswith("azure_batch://torchx/second:torchx-echo-")
        assert client.get_job(job_of(by_connection.handle)).id == job_of(by_connection.handle)

        # No Airflow connection, no Airflow home: the account's URL (here from .torchxconfig) and its key from
        # the environment. Nothing is written where Airflow keeps its files.
        (workdir / ".torchxconfig").write_text(
            f"[azure_batch]\naccount_url = {second.url}\naccount_name = secondaccount\n"
        )
        home = tmp_path / "airflow-home"
        home.mkdir()
        direct_env = {"AIRFLOW_HOME": str(home), "AZURE_BATCH_ACCESS_KEY": SECOND_KEY}
        direct = torchx("run", "-s", "azure_batch", "utils.echo", "--msg", "direct", env=direct_env)
        assert direct.code == 0, direct.err
        host = second.url.split("://", 1)[1]
        assert direct.handle.startswith(f"azure_batch://torchx/http@{host}:torchx-echo-")
        wait_until(
            lambda: client.get_job(job_of(direct.handle)).state == "completed", timeout=120, what="the direct app"
        )
        status = json.loads(torchx("status", "--json", direct.handle, env=direct_env).out)
        assert status["state"] == "SUCCEEDED"
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
