"""The preflight check end to end against the local Batch service (--tls: tokens, Resource Manager) and Azurite:
a ready connection passes every line, and each thing a run would trip on is named with its fix."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from azure.batch import BatchClient
from azure.core.credentials import AzureNamedKeyCredential
from azure.storage.blob import BlobServiceClient

from airflow_provider_azbatch.pools import BatchPool, PoolImage
from airflow_provider_azbatch.preflight import Status, check
from local_azure_batch.auth.tls import generate_tls_files
from local_azure_batch.testing import run_local_batch_service
from tests.azurite import run_azurite
from tests.helpers import pool_options

DAGS = Path(__file__).parent / "dags"
DOCUMENTED_REPORT = Path(__file__).resolve().parents[2] / "docs" / "examples" / "check_report.txt"
SCORING = DAGS / "scoring.py"
WRONG_KEY = "d3Jvbmcta2V5LW9mLWFub3RoZXItYWNjb3VudA=="
DATA_ONLY_ID, DATA_ONLY_SECRET = "00000000-0000-0000-0000-00000000c122", "data-only-secret"
A100_FAMILY = "StandardNCADSA100v4Family"


@pytest.fixture(scope="module")
def batch():
    args = [
        "--quiet",
        "--core-quota",
        f"{A100_FAMILY}=24",
        "--unavailable-vm-size",
        "standard_nc4as_t4_v3",
        "--principal",
        f"{DATA_ONLY_ID}:{DATA_ONLY_SECRET}:batch-data-contributor",
    ]
    with run_local_batch_service(tls=True, extra_args=args) as service:
        client = BatchClient(
            service.url,
            AzureNamedKeyCredential(service.account_name, service.account_key),
            connection_verify=service.ca_file,
        )
        client.create_pool(pool_options("preflight-existing", nodes=0))
        service.client = client
        yield service
        client.close()


def _shared_key(batch, azurite=None, *, key=None, **extra) -> dict:
    storage = {"storage_account_url": azurite.url, "storage_account_key": azurite.key} if azurite else {}
    return {
        "conn_type": "azbatch",
        "login": batch.account_name,
        "password": key or batch.account_key,
        "extra": {"account_url": batch.url, "ca_bundle": batch.ca_file, **storage, **extra},
    }


def _principal(batch, azurite=None, *, client_id=None, secret=None, **extra) -> dict:
    storage = {"storage_account_url": azurite.url, "storage_account_key": azurite.key} if azurite else {}
    return {
        "conn_type": "azbatch",
        "login": batch.account_name,
        "extra": {
            "account_url": batch.url,
            "auth_method": "service_principal",
            "tenant_id": batch.tenant_id,
            "client_id": client_id or batch.client_id,
            "client_secret": secret or batch.client_secret,
            "cloud": "custom",
            "authority_host": batch.url,
            "token_scope": "https://batch.core.windows.net//.default",
            # The local service's Resource Manager, as a custom cloud's.
            "resource_manager_url": batch.url,
            "subscription_id": batch.subscription_id,
            "ca_bundle": batch.ca_file,
            **storage,
            **extra,
        },
    }


def _use(monkeypatch, conn_id: str, connection: dict) -> str:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(connection))
    return conn_id


def _statuses(report) -> dict[str, str]:
    return {finding.check: finding.status.value for finding in report.findings}


def _no_secret_in(report, *secrets: str) -> None:
    text = json.dumps(report.to_json())
    for secret in secrets:
        assert secret not in text
    assert "sig=" not in text


def test_a_ready_connection_passes_every_check_and_leaves_nothing_behind(batch, azurite, monkeypatch):
    conn_id = _use(monkeypatch, "preflight_ready", _principal(batch, azurite))

    report = check(conn_id, dag_file=SCORING)

    cpu = "pool[preflight_scoring.score, preflight_scoring.shards]"
    assert _statuses(report) == {
        "connection": "ok",
        "dag_file": "ok",
        "authentication": "ok",
        "batch.list_jobs": "ok",
        "batch.create_job": "ok",
        "batch.delete_job": "ok",
        "pool[preflight_scoring.report].exists": "ok",
        "storage.account": "ok",
        "storage.container": "ok",
        "storage.blob": "ok",
        "storage.sas": "ok",
        "management.account": "ok",
        "storage.network": "ok",
        f"{cpu}.image": "ok",
        f"{cpu}.vm_size": "ok",
        f"{cpu}.quota": "ok",
    }
    assert report.ok
    assert report.exit_code(strict=True) == 0
    assert report.identity.description == (
        f"service principal {batch.client_id}, object id 00000000-0000-0000-0000-0000000000b1, tenant {batch.tenant_id}"
    )
    assert report.finding(f"{cpu}.quota").detail == (
        "needs 6 of the account's 500 dedicated vCPUs for standardFSv2Family (3 nodes x 2 vCPUs of Standard_F2s_v2; "
        "shared with its other pools)"
    )
    assert report.finding("management.account").detail == (
        "Batch account 'devbatchaccount1' in region westeurope (resource group local-batch), pool allocation mode "
        "BatchService"
    )
    # The throw-away job and container are gone.
    job = report.finding("batch.create_job").detail.split()[1]
    assert job.startswith("azbatch-check-")
    assert job not in [j.id for j in batch.client.list_jobs()]
    blobs = BlobServiceClient(azurite.url, credential=AzureNamedKeyCredential(azurite.account, azurite.key))
    assert job not in [container.name for container in blobs.list_containers()]
    _no_secret_in(report, batch.client_secret, azurite.key)


def test_a_shared_key_connection_passes_and_says_why_quotas_are_unknown(batch, azurite, monkeypatch):
    conn_id = _use(monkeypatch, "preflight_key", _shared_key(batch, azurite))

    report = check(conn_id, pools=[BatchPool.auto({"cpus": 2}, max_nodes=2)])

    assert report.identity.description == "the shared key of Batch account 'devbatchaccount1'"
    assert (
        report.finding("authentication").detail
        == "Batch account 'devbatchaccount1' accepts the connection's shared key"
    )
    quota = report.finding("pool[pools[0]].quota")
    assert quota.status is Status.UNKNOWN
    assert quota.fix.startswith("check again with --management-credential default (DefaultAzureCredential")
    assert report.finding("pool[pools[0]].image").status is Status.OK
    assert (report.exit_code(), report.exit_code(strict=True)) == (0, 1)
    _no_secret_in(report, batch.account_key, azurite.key)


def test_a_shared_key_connection_reads_quotas_with_the_default_credential(batch, azurite, monkeypatch):
    # DefaultAzureCredential's first member reads a service principal from the environment.
    monkeypatch.setenv("AZURE_TENANT_ID", batch.tenant_id)
    monkeypatch.setenv("AZURE_CLIENT_ID", batch.client_id)
    monkeypatch.setenv("AZURE_CLIENT_SECRET", batch.client_secret)
    connection = _shared_key(
        batch,
        azurite,
        subscription_id=batch.subscription_id,
        authority_host=batch.url,
        resource_manager_url=batch.url,
    )
    conn_id = _use(monkeypatch, "preflight_key", connection)

    report = check(
        conn_id,
        pools={"gpu": BatchPool.auto({"gpus": 4, "gpu_kind": "A100"}, max_nodes=2)},
        management_credential="default",
    )

    quota = report.finding("pool[gpu].quota")
    assert quota.status is Status.FAILED
    assert quota.detail == (
        "the pool needs 192 dedicated vCPUs (2 nodes x 96 vCPUs of Standard_NC96ads_A100_v4, family "
        f"{A100_FAMILY}); Batch account 'devbatchaccount1' has a quota of 24 for {A100_FAMILY}"
    )
    assert quota.fix == (
        f"request at least 192 dedicated vCPUs for {A100_FAMILY} (Azure portal, the Batch account, Quotas, Request "
        "quota increase; the quota is per Batch account, not the subscription's)"
    )
    assert report.exit_code() == 1


def test_a_wrong_key_is_named_with_its_fix(batch, azurite, monkeypatch):
    conn_id = _use(monkeypatch, "preflight_wrong_key", _shared_key(batch, azurite, key=WRONG_KEY))

    report = check(conn_id)

    auth = report.finding("authentication")
    assert auth.status is Status.FAILED
    assert auth.detail.startswith(
        "Batch account 'devbatchaccount1' refuses the connection's shared key: AuthenticationFailed: Server failed "
        "to authenticate the request."
    )
    assert auth.fix == (
        "set login to the Batch account's name and password to one of its keys: az batch account keys list --name "
        "devbatchaccount1 --resource-group <resource group>"
    )
    # Nothing is tried with a key Batch refused; the storage account is checked on its own.
    assert report.finding("batch.create_job") is None
    assert report.finding("storage.sas").status is Status.OK
    assert report.exit_code() == 1
    _no_secret_in(report, WRONG_KEY, azurite.key)


def test_a_wrong_client_secret_is_named_with_its_fix(batch, azurite, monkeypatch):
    conn_id = _use(monkeypatch, "preflight_secret", _principal(batch, azurite, secret="not-the-secret"))

    report = check(conn_id)

    auth = report.finding("authentication")
    assert auth.status is Status.FAILED
    assert auth.detail.startswith("the service_principal credential gets no token for Batch: ")
    assert "AADSTS7000215: Invalid client secret provided" in auth.detail
    assert auth.fix.startswith("check tenant_id, client_id and client_secret (or the certificate)")
    assert report.identity is None
    assert report.finding("batch.list_jobs") is None
    _no_secret_in(report, "not-the-secret", azurite.key)


def test_a_credential_without_rights_on_the_account_is_named_with_the_role_to_assign(batch, azurite, monkeypatch):
    no_role = _principal(
        batch,
        azurite,
        client_id=batch.no_role_client_id,
        secret=batch.no_role_client_secret,
        resource_group=batch.resource_group,
    )
    conn_id = _use(monkeypatch, "preflight_no_role", no_role)

    report = check(conn_id, pools=[BatchPool.auto({"cpus": 2})])

    assert report.finding("authentication").status is Status.OK
    listing = report.finding("batch.list_jobs")
    assert listing.status is Status.FAILED
    assert listing.detail == (
        f"Batch account 'devbatchaccount1' refuses service principal {batch.no_role_client_id}, object id "
        f"00000000-0000-0000-0000-0000000000b2, tenant {batch.tenant_id}: AuthorizationFailure: This request is not "
        "authorized to perform this operation.; it has no role on the account's data plane"
    )
    account = (
        f"/subscriptions/{batch.subscription_id}/resourceGroups/local-batch/providers/Microsoft.Batch/batchAccounts/"
        "devbatchaccount1"
    )
    assert listing.fix == (
        'assign it Azure Batch Data Contributor on the Batch account: az role assignment create --role "Azure Batch '
        'Data Contributor" --assignee-object-id 00000000-0000-0000-0000-0000000000b2 --assignee-principal-type '
        f"ServicePrincipal --scope {account}"
    )
    # Nothing is created for an identity Batch refused.
    assert report.finding("batch.create_job") is None
    # Resource Manager refuses it too: the quota is unknown, with the Reader role to assign.
    management = report.finding("management.account")
    assert management.status is Status.UNKNOWN
    assert management.detail == (
        "the Batch account's quotas and region could not be read: the identity may not read the Batch account "
        "(AuthorizationFailed)"
    )
    assert management.fix == (
        'assign it Reader there: az role assignment create --role "Reader" --assignee-object-id '
        f"00000000-0000-0000-0000-0000000000b2 --assignee-principal-type ServicePrincipal --scope {account}"
    )
    assert report.exit_code() == 1


def test_an_identity_that_may_not_read_resource_manager_leaves_quotas_unknown(batch, azurite, monkeypatch):
    # No resource_group on the connection: the account is looked for among those the identity may read.
    conn_id = _use(
        monkeypatch, "preflight_data_only", _principal(batch, azurite, client_id=DATA_ONLY_ID, secret=DATA_ONLY_SECRET)
    )

    report = check(conn_id, pools=[BatchPool.auto({"cpus": 2})])

    assert report.finding("batch.create_job").status is Status.OK
    management = report.finding("management.account")
    assert management.status is Status.UNKNOWN
    assert management.detail == (
        "the Batch account's quotas and region could not be read: subscription "
        f"{batch.subscription_id} has no Batch account at {batch.url} that the identity may read"
    )
    assert management.fix.startswith(
        "set resource_group on the connection, and assign the identity Reader on the account: az role assignment "
        'create --role "Reader" --assignee-object-id '
    )
    assert report.finding("pool[pools[0]].vm_size").status is Status.UNKNOWN
    assert report.finding("pool[pools[0]].image").status is Status.OK
    assert (report.exit_code(), report.exit_code(strict=True)) == (0, 1)


def test_a_missing_storage_account_is_named_with_its_fix(batch, azurite, monkeypatch):
    # No storage account, and the DAG's @task.azure_batch needs one.
    conn_id = _use(monkeypatch, "preflight_no_storage", _principal(batch))
    report = check(conn_id, dag_file=SCORING)
    storage = report.finding("storage.account")
    assert storage.status is Status.FAILED
    assert storage.detail == (
        "the connection has no storage account, and preflight_scoring.score need one (a workspace, "
        "@task.azure_batch, Blob inputs or outputs, uploaded logs)"
    )
    assert storage.fix.startswith("set storage_account_url (https://<account>.blob.core.windows.net)")

    # A storage account that does not exist where the connection says.
    elsewhere = azurite.url.rsplit("/", 1)[0] + "/nosuchaccount"
    connection = _principal(batch, storage_account_url=elsewhere, storage_account_key=azurite.key)
    report = check(_use(monkeypatch, "preflight_no_storage", connection))
    storage = report.finding("storage.account")
    assert storage.status is Status.FAILED
    assert storage.detail.startswith(f"storage account 'nosuchaccount' does not exist at {elsewhere} (")
    assert storage.fix == (
        "check storage_account_url: the account's Blob endpoint (az storage account show --name nosuchaccount "
        "--query primaryEndpoints.blob)"
    )
    assert report.finding("storage.container") is None


@pytest.fixture(scope="module")
def oauth_azurite(tmp_path_factory):
    """Azurite over https taking Entra ID tokens (from the local service's authority), and its CA file."""
    tls = generate_tls_files(tmp_path_factory.mktemp("azurite-tls"), "127.0.0.1")
    with run_azurite(oauth_cert=tls.server_cert, oauth_key=tls.server_key) as service:
        yield service, tls.ca_cert


def test_an_entra_connection_signs_sas_with_a_user_delegation_key(batch, oauth_azurite, tmp_path, monkeypatch):
    azurite, azurite_ca = oauth_azurite
    # One CA bundle for the connection: the local Batch service's CA and Azurite's.
    bundle = tmp_path / "ca.pem"
    bundle.write_text(Path(batch.ca_file).read_text() + azurite_ca.read_text())
    connection = _principal(batch, storage_account_url=azurite.url, ca_bundle=str(bundle))

    report = check(_use(monkeypatch, "preflight_entra_storage", connection))

    assert [(f.check, f.status.value) for f in report.findings if f.check.startswith("storage.")] == [
        ("storage.account", "ok"),
        ("storage.container", "ok"),
        ("storage.blob", "ok"),
        ("storage.sas", "ok"),
        ("storage.network", "ok"),
    ]
    assert report.finding("storage.sas").detail == (
        "a SAS signed with a user delegation key reads the blob (tasks get such SAS)"
    )


def test_a_wrong_storage_key_is_named_with_its_fix(batch, azurite, monkeypatch):
    connection = _principal(batch, storage_account_url=azurite.url, storage_account_key=WRONG_KEY)
    report = check(_use(monkeypatch, "preflight_storage_key", connection))
    storage = report.finding("storage.account")
    assert storage.status is Status.FAILED
    assert storage.detail.startswith("storage account 'devstoreaccount1' refuses storage_account_key: ")
    assert (
        storage.fix
        == "set storage_account_key to one of its keys: az storage account keys list --account-name devstoreaccount1"
    )


def test_an_image_the_account_does_not_offer_is_named_with_its_fix(batch, azurite, monkeypatch):
    conn_id = _use(monkeypatch, "preflight_image", _principal(batch, azurite))
    focal = PoolImage.marketplace(
        "canonical", "0001-com-ubuntu-server-focal", "20_04-lts", node_agent_sku_id="batch.node.ubuntu 20.04"
    )

    report = check(conn_id, pools={"focal": BatchPool.shared("focal", vm_size="standard_d2s_v5", image=focal)})

    image = report.finding("pool[focal].image")
    assert image.status is Status.FAILED
    assert image.detail == (
        "image canonical:0001-com-ubuntu-server-focal:20_04-lts is not offered by Batch account 'devbatchaccount1' "
        "(not among its supported images): its nodes would fail to allocate"
    )
    assert image.fix.startswith(
        f"choose an image it lists (az batch pool supported-images list --account-name devbatchaccount1 "
        f"--account-endpoint {batch.url} --output table)"
    )
    assert report.finding("pool[focal].vm_size").status is Status.OK


def test_a_vm_size_not_offered_in_the_region_is_named_with_its_fix(batch, azurite, monkeypatch):
    conn_id = _use(monkeypatch, "preflight_size", _principal(batch, azurite))

    # The cheapest T4 size, which this account's region does not offer.
    report = check(conn_id, pools={"t4": BatchPool.auto({"gpus": 1, "gpu_kind": "T4"})})

    size = report.finding("pool[t4].vm_size")
    assert size.status is Status.FAILED
    assert size.detail == "VM size standard_nc4as_t4_v3 is not offered to Batch in region westeurope"
    assert size.fix == (
        "choose a size Batch offers there (az batch location list-skus --location westeurope --output table): other "
        "requirements, or vm_size=; or use a Batch account in a region that offers it"
    )
    assert report.finding("pool[t4].quota").status is Status.UNKNOWN


def test_a_dag_file_that_does_not_import_fails_the_check(batch, tmp_path, monkeypatch):
    broken = tmp_path / "broken.py"
    broken.write_text("from airflow.sdk import DAG\nraise RuntimeError('no DAG today')\n")
    conn_id = _use(monkeypatch, "preflight_broken", _principal(batch))

    report = check(conn_id, dag_file=broken)

    dag_file = report.finding("dag_file")
    assert dag_file.status is Status.FAILED
    assert dag_file.detail == f"{broken} does not import: RuntimeError: no DAG today"
    assert dag_file.fix == f"fix the DAG file (python {broken} shows the whole error), then check again"


def test_the_documented_report_is_what_the_command_prints(batch, azurite, monkeypatch, capsys):
    """docs/howto/check.md shows this run's output (addresses and the throw-away names as the page writes them)."""
    from airflow_provider_azbatch.preflight.__main__ import main

    _use(monkeypatch, "azbatch_prod", _principal(batch, azurite, resource_group=batch.resource_group))
    capsys.readouterr()
    gpus = '{"gpus": 4, "gpu_kind": "A100"}'
    code = main(["--conn-id", "azbatch_prod", "--dag-file", str(SCORING), "--requirements", gpus, "--max-nodes", "2"])
    text = capsys.readouterr().out
    text = text.replace(batch.url, "https://127.0.0.1:8443").replace(
        azurite.url, "http://127.0.0.1:10000/devstoreaccount1"
    )
    text = text.replace(str(SCORING), "dags/scoring.py")
    text = re.sub(r"azbatch-check-[0-9a-f]{8}", "azbatch-check-5f0c2a91", text)

    assert code == 1
    if os.environ.get("AZBATCH_UPDATE_DOCS"):
        DOCUMENTED_REPORT.write_text(text, encoding="utf-8")
    assert text == DOCUMENTED_REPORT.read_text(encoding="utf-8"), (
        f"{DOCUMENTED_REPORT} is not what the check prints: run this test with AZBATCH_UPDATE_DOCS=1"
    )


def test_the_documented_python_call(batch, azurite, monkeypatch, capsys):
    from docs.examples.preflight import ready

    _use(monkeypatch, "azbatch_prod", _principal(batch))  # no storage account: the DAG's @task.azure_batch needs one

    assert ready("azbatch_prod", str(SCORING)) is False
    # Airflow's own log lines (parsing the DAG file) may go to stdout too.
    lines = [line for line in capsys.readouterr().out.splitlines() if not re.match(r"\d{4}-\d\d-\d\dT", line)]
    assert lines[0].startswith("failed: storage.account: the connection has no storage account, and ")
    assert lines[1].startswith("    fix: set storage_account_url")


def test_an_undefined_connection_is_the_only_finding(monkeypatch):
    monkeypatch.delenv("AIRFLOW_CONN_PREFLIGHT_NOWHERE", raising=False)
    report = check("preflight_nowhere")
    (finding,) = report.findings
    assert finding.check == "connection"
    assert finding.detail == "connection 'preflight_nowhere' is not defined"
    assert finding.fix.startswith("Create it with `airflow connections add preflight_nowhere --conn-type azbatch")
    assert report.exit_code() == 1
