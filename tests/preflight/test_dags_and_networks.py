"""The check sees what the DAGs folder will ask (no pool flags), and what the nodes will not reach, against the
local Batch service and its Resource Manager: each failed line names its fix, and the fix, applied as the `az`
command would apply it (the same Resource Manager request), turns the line ok."""

from __future__ import annotations

import json
import ssl
import urllib.request
import uuid

import pytest
from azure.core.credentials import AzureNamedKeyCredential
from azure.identity import ClientSecretCredential
from azure.storage.blob import BlobLeaseClient, BlobServiceClient

from airflow_provider_azbatch.pools import BatchPool, PoolNetwork
from airflow_provider_azbatch.preflight import Status, check
from airflow_provider_azbatch.preflight.__main__ import main
from local_azure_batch.testing import run_local_batch_service
from tests.preflight.test_check import _principal, _use

A100_FAMILY = "StandardNCADSA100v4Family"
ADMIN_ID, ADMIN_SECRET = "00000000-0000-0000-0000-00000000ad01", "owner-secret"
DEV_OBJECT_ID = "00000000-0000-0000-0000-0000000000b1"
NETWORK_CONTRIBUTOR = "4d97b98b-1d4f-4787-a291-c67834d212e7"
GPU_DAG = """
from datetime import datetime

from airflow.sdk import DAG

from airflow_provider_azbatch.operators.job import AzureBatchJobOperator
from airflow_provider_azbatch.pools import BatchPool

with DAG("gpu_train", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    AzureBatchJobOperator(
        task_id="train",
        batch_pool=BatchPool.auto({"gpus": 1, "gpu_kind": "A100"}, max_nodes=2),
        command="nvidia-smi",
    )
"""
CPU_DAG = """
from datetime import datetime

from airflow.sdk import DAG

from airflow_provider_azbatch.operators.job import AzureBatchJobOperator
from airflow_provider_azbatch.pools import BatchPool

with DAG("cpu_fanout", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    AzureBatchJobOperator(task_id="wide", batch_pool=BatchPool.shared("wide", requirements={"cpus": 2}, max_nodes=3),
                          command="echo wide")
    AzureBatchJobOperator(task_id="narrow", batch_pool=BatchPool.shared("narrow", requirements={"cpus": 2},
                          max_nodes=2), command="echo narrow")
"""


@pytest.fixture(scope="module")
def batch():
    args = [
        "--quiet",
        "--core-quota",
        f"{A100_FAMILY}=0",
        "--core-quota",
        "standardFSv2Family=8",
        "--principal",
        f"{ADMIN_ID}:{ADMIN_SECRET}:owner",
    ]
    with run_local_batch_service(tls=True, extra_args=args) as service:
        yield service


def _arm(batch, method: str, path: str, body: dict | None = None, api: str = "2024-05-01") -> dict:
    """A Resource Manager request as the `az` command sends it, by an Owner of the subscription."""
    credential = ClientSecretCredential(
        batch.tenant_id,
        ADMIN_ID,
        ADMIN_SECRET,
        authority=batch.url,
        disable_instance_discovery=True,
        connection_verify=batch.ca_file,
    )
    token = credential.get_token("https://management.azure.com/.default").token
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(f"{batch.url}{path}?api-version={api}", data=data, method=method)
    request.add_header("Authorization", f"Bearer {token}")
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, context=ssl.create_default_context(cafile=batch.ca_file)) as response:
        return json.loads(response.read() or b"{}")


def _group(batch) -> str:
    return f"/subscriptions/{batch.subscription_id}/resourceGroups/{batch.resource_group}"


def test_the_dags_folder_is_checked_with_no_pool_flags_and_a_family_without_quota_fails(
    batch, tmp_path, monkeypatch, capsys
):
    folder = tmp_path / "dags"
    folder.mkdir()
    (folder / "gpu_train.py").write_text(GPU_DAG)
    monkeypatch.setenv("AIRFLOW__CORE__DAGS_FOLDER", str(folder))
    _use(monkeypatch, "azbatch_gpu", _principal(batch))
    capsys.readouterr()

    code = main(["--conn-id", "azbatch_gpu"])

    lines = capsys.readouterr().out.splitlines()
    assert code == 1
    assert f"ok       dags_folder: {folder}: 1 Batch task(s) in 1 DAG(s), 1 pool(s) to check" in lines
    failed = lines.index(
        "FAILED   pool[gpu_train.train].quota: the pool needs 48 dedicated vCPUs (2 nodes x 24 vCPUs of "
        f"Standard_NC24ads_A100_v4, family {A100_FAMILY}); Batch account 'devbatchaccount1' has a quota of 0 for "
        f"{A100_FAMILY}"
    )
    assert lines[failed + 1] == (
        f"         fix: request at least 48 dedicated vCPUs for {A100_FAMILY} (Azure portal, the Batch account, "
        "Quotas, Request quota increase; the quota is per Batch account, not the subscription's)"
    )

    # --no-dags: the fast check reads no DAG and checks no pool.
    assert main(["--conn-id", "azbatch_gpu", "--no-dags"]) == 0
    fast = capsys.readouterr().out
    assert "dags_folder" not in fast
    assert "pool[" not in fast


def test_the_quota_a_family_gives_is_summed_over_the_pools_it_serves(batch, tmp_path, monkeypatch):
    (tmp_path / "cpu_fanout.py").write_text(CPU_DAG)
    conn_id = _use(monkeypatch, "azbatch_cpu", _principal(batch))

    report = check(conn_id, dags_folder=tmp_path)

    # Each pool fits the family's 8 vCPUs alone; together they need 10.
    assert report.finding("pool[cpu_fanout.wide].quota").status is Status.OK
    assert report.finding("pool[cpu_fanout.narrow].quota").status is Status.OK
    family = report.finding("quota[standardFSv2Family]")
    assert family.status is Status.FAILED
    assert family.detail == (
        "2 pools need 10 dedicated vCPUs of standardFSv2Family together at their largest (cpu_fanout.narrow: 4; "
        "cpu_fanout.wide: 6); Batch account 'devbatchaccount1' has a quota of 8"
    )
    assert family.fix.startswith("request at least 10 dedicated vCPUs for standardFSv2Family")


def test_a_storage_account_refusing_public_access_fails_until_the_fix_is_applied(batch, azurite, tmp_path, monkeypatch):
    (tmp_path / "gpu_train.py").write_text(GPU_DAG.replace('command="nvidia-smi"', 'command="x", workspace="."'))
    conn_id = _use(monkeypatch, "azbatch_firewall", _principal(batch, azurite))
    account = f"{_group(batch)}/providers/Microsoft.Storage/storageAccounts/devstoreaccount1"
    _arm(batch, "PATCH", account, {"properties": {"publicNetworkAccess": "Disabled"}}, api="2023-05-01")

    report = check(conn_id, dags_folder=tmp_path)

    network = report.finding("storage.network")
    assert network.status is Status.FAILED
    assert network.detail == (
        "storage account 'devstoreaccount1' refuses public network access and the pools are in no virtual network, "
        "while the nodes fetch workspaces and functions through SAS URLs from their own addresses: tasks that need "
        "it (gpu_train.train) would fail"
    )
    fix = (
        "az storage account update --name devstoreaccount1 --resource-group local-batch --public-network-access Enabled"
    )
    assert network.fix.startswith(fix)
    # Airflow reaches it (the check ran here), the nodes would not: the other storage lines are ok.
    assert report.finding("storage.sas").status is Status.OK

    _arm(batch, "PATCH", account, {"properties": {"publicNetworkAccess": "Enabled"}}, api="2023-05-01")
    assert check(conn_id, dags_folder=tmp_path).finding("storage.network").status is Status.OK


def test_a_subnet_the_identity_may_not_join_fails_until_the_role_is_assigned(batch, monkeypatch):
    vnet = f"{_group(batch)}/providers/Microsoft.Network/virtualNetworks/batch-vnet"
    _arm(batch, "PUT", vnet, {"properties": {"addressSpace": {"addressPrefixes": ["10.0.0.0/16"]}}})
    subnet = f"{vnet}/subnets/pools"
    _arm(batch, "PUT", subnet, {"properties": {"addressPrefix": "10.0.1.0/24"}})
    conn_id = _use(monkeypatch, "azbatch_vnet", _principal(batch))
    pool = {"vnet": BatchPool.auto({"cpus": 2}, network=PoolNetwork(subnet_id=subnet))}

    line = check(conn_id, pools=pool).finding("pool[vnet].subnet")

    assert line.status is Status.FAILED
    assert line.detail == (
        f"service principal {batch.client_id}, object id {DEV_OBJECT_ID}, tenant {batch.tenant_id} may not join "
        "subnet pools (10.0.1.0/24) (Microsoft.Network/virtualNetworks/subnets/join/action): Batch refuses to create "
        "a pool in it for this identity"
    )
    assert line.fix == (
        'assign it Network Contributor on the subnet: az role assignment create --role "Network Contributor" '
        f"--assignee-object-id {DEV_OBJECT_ID} --assignee-principal-type ServicePrincipal --scope {subnet}"
    )

    # What `az role assignment create` sends.
    assignment = f"{subnet}/providers/Microsoft.Authorization/roleAssignments/{uuid.uuid4()}"
    definition = f"/subscriptions/{batch.subscription_id}/providers/Microsoft.Authorization/roleDefinitions/"
    body = {
        "properties": {
            "roleDefinitionId": definition + NETWORK_CONTRIBUTOR,
            "principalId": DEV_OBJECT_ID,
            "principalType": "ServicePrincipal",
        }
    }
    _arm(batch, "PUT", assignment, body, api="2022-04-01")
    line = check(conn_id, pools=pool).finding("pool[vnet].subnet")
    assert line.status is Status.OK
    assert line.detail.startswith("subnet pools (10.0.1.0/24) exists and service principal ")


def test_an_nsg_denying_node_management_fails_until_the_rule_is_added(batch, monkeypatch):
    nsg = f"{_group(batch)}/providers/Microsoft.Network/networkSecurityGroups/pools-nsg"
    deny = {
        "protocol": "*",
        "sourceAddressPrefix": "*",
        "sourcePortRange": "*",
        "destinationAddressPrefix": "Internet",
        "destinationPortRange": "*",
        "access": "Deny",
        "priority": 200,
        "direction": "Outbound",
    }
    _arm(batch, "PUT", nsg, {"properties": {"securityRules": [{"name": "DenyInternetOut", "properties": deny}]}})
    vnet = f"{_group(batch)}/providers/Microsoft.Network/virtualNetworks/nsg-vnet"
    _arm(batch, "PUT", vnet, {"properties": {"addressSpace": {"addressPrefixes": ["10.1.0.0/16"]}}})
    subnet = f"{vnet}/subnets/pools"
    _arm(batch, "PUT", subnet, {"properties": {"addressPrefix": "10.1.1.0/24", "networkSecurityGroup": {"id": nsg}}})
    conn_id = _use(monkeypatch, "azbatch_nsg", _principal(batch))
    pool = {"nsg": BatchPool.auto({"cpus": 2}, network=PoolNetwork(subnet_id=subnet))}

    line = check(conn_id, pools=pool).finding("pool[nsg].nsg")

    assert line.status is Status.FAILED
    assert line.detail == (
        "rule DenyInternetOut (priority 200) of network security group pools-nsg denies TCP 443 out to "
        "BatchNodeManagement.westeurope, Storage.westeurope: the nodes cannot reach Batch node management and stay "
        "unusable"
    )
    commands = line.fix.split(" ; ")
    assert commands[0] == (
        "az network nsg rule create --resource-group local-batch --nsg-name pools-nsg --name "
        "AllowBatchNodeManagementOutbound --priority 199 --direction Outbound --access Allow --protocol Tcp "
        "--destination-address-prefixes BatchNodeManagement.westeurope --destination-port-ranges 443"
    )

    # What `az network nsg rule create` sends, for each rule the fix names.
    for service, priority in (("BatchNodeManagement", 199), ("Storage", 198)):
        allow = {
            "protocol": "Tcp",
            "sourceAddressPrefix": "*",
            "sourcePortRange": "*",
            "destinationAddressPrefixes": [f"{service}.westeurope"],
            "destinationPortRanges": ["443"],
            "access": "Allow",
            "priority": priority,
            "direction": "Outbound",
        }
        _arm(batch, "PUT", f"{nsg}/securityRules/Allow{service}Outbound", {"properties": allow})
    assert check(conn_id, pools=pool).finding("pool[nsg].nsg").status is Status.OK


def test_the_local_resource_manager_answers_the_reads_the_check_makes(batch):
    accounts = _arm(
        batch,
        "GET",
        f"/subscriptions/{batch.subscription_id}/providers/Microsoft.Storage/storageAccounts",
        api="2023-05-01",
    )
    (account,) = [item for item in accounts["value"] if item["name"] == "devstoreaccount1"]
    assert account["properties"]["networkAcls"]["defaultAction"] == "Allow"
    assert account["properties"]["publicNetworkAccess"] == "Enabled"
    permissions = _arm(batch, "GET", f"{_group(batch)}/providers/Microsoft.Authorization/permissions", api="2022-04-01")
    assert {"actions": ["*"], "notActions": [], "dataActions": [], "notDataActions": []} in permissions["value"]


def test_a_container_the_check_could_not_delete_is_reported(batch, azurite, monkeypatch):
    from airflow_provider_azbatch.preflight import storage_access

    leases = []
    checked = storage_access._blob_and_sas

    def then_leased(storage, service, identity, name):
        # Someone takes a lease on the container meanwhile: Storage refuses to delete it (412 LeaseIdMissing).
        findings = checked(storage, service, identity, name)
        leases.append((name, service.get_container_client(name).acquire_lease()))
        return findings

    monkeypatch.setattr(storage_access, "_blob_and_sas", then_leased)
    conn_id = _use(monkeypatch, "azbatch_left", _principal(batch, azurite))

    report = check(conn_id)

    ((name, lease),) = leases
    left = report.finding("storage.cleanup")
    assert left.status is Status.WARNING
    assert left.detail.startswith(
        f"container {name} of storage account 'devstoreaccount1' could not be deleted and is left behind: "
        "LeaseIdMissing"
    )
    assert left.fix == (
        f"delete it: az storage container delete --name {name} --account-name devstoreaccount1 --auth-mode login"
    )
    with BlobServiceClient(azurite.url, credential=AzureNamedKeyCredential(azurite.account, azurite.key)) as blobs:
        container = blobs.get_container_client(name)
        BlobLeaseClient(container, lease_id=lease.id).break_lease(lease_break_period=0)
        container.delete_container()
