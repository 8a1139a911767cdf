"""The management plane (--tls) and what a preflight asks of the data plane: the account, its quotas and region,
the images it offers, and principals with and without roles, answered and refused as Azure does."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from azure.batch import BatchClient
from azure.batch import models as m
from azure.core.credentials import AzureNamedKeyCredential
from azure.core.exceptions import HttpResponseError
from azure.identity import ClientSecretCredential

from local_azure_batch.testing import run_local_batch_service

EXAMPLES = Path(__file__).parent / "fixtures" / "batch-service"
ARM = "https://management.azure.com/.default"
BATCH = "https://batch.core.windows.net//.default"
API = "api-version=2024-07-01"
READER_ID, READER_SECRET = "00000000-0000-0000-0000-00000000c121", "account-reader-secret"


@pytest.fixture(scope="module")
def service():
    args = [
        "--quiet",
        "--core-quota",
        "standardncadsa100v4family=24",
        "--low-priority-core-quota",
        "40",
        "--unavailable-vm-size",
        "Standard_NC4as_T4_v3",
        "--principal",
        f"{READER_ID}:{READER_SECRET}:batch-data-contributor,account-reader",
    ]
    with run_local_batch_service(tls=True, extra_args=args) as running:
        yield running


def _credential(service, client_id, secret):
    return ClientSecretCredential(
        service.tenant_id,
        client_id,
        secret,
        authority=service.url,
        disable_instance_discovery=True,
        connection_verify=service.ca_file,
    )


def _get(service, path, token=None, query=API):
    request = urllib.request.Request(f"{service.url}{path}{'?' + query if query else ''}")
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    context = ssl.create_default_context(cafile=service.ca_file)
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def _token(service, client_id=None, secret=None, scope=ARM):
    credential = _credential(service, client_id or service.client_id, secret or service.client_secret)
    return credential.get_token(scope).token


def _account_path(service, account=None, group=None):
    return (
        f"/subscriptions/{service.subscription_id}/resourceGroups/{group or service.resource_group}/providers/"
        f"Microsoft.Batch/batchAccounts/{account or service.account_name}"
    )


def _skus_path(service, location="westeurope"):
    return f"/subscriptions/{service.subscription_id}/providers/Microsoft.Batch/locations/{location}/virtualMachineSkus"


def test_the_account_has_the_shape_of_the_reference_example_with_its_quotas(service):
    status, account = _get(service, _account_path(service), _token(service))
    assert status == 200
    example = json.loads((EXAMPLES / "management-examples" / "BatchAccountGet.json").read_text())["responses"]["200"]
    expected = example["body"]
    assert set(account) == set(expected)
    # autoStorage (the account's linked storage account) is not modelled.
    assert set(expected["properties"]) - set(account["properties"]) == {"autoStorage"}
    assert account["location"] == "westeurope"
    assert account["id"].endswith(
        "/resourceGroups/local-batch/providers/Microsoft.Batch/batchAccounts/devbatchaccount1"
    )
    properties = account["properties"]
    assert properties["accountEndpoint"] == service.url.removeprefix("https://")
    assert properties["poolAllocationMode"] == "BatchService"
    assert properties["dedicatedCoreQuotaPerVMFamilyEnforced"] is True
    assert properties["lowPriorityCoreQuota"] == 40
    quotas = {family["name"]: family["coreQuota"] for family in properties["dedicatedCoreQuotaPerVMFamily"]}
    assert quotas["StandardNCADSA100v4Family"] == 24
    assert quotas["standardDSv5Family"] == 500


def test_the_region_lists_the_sizes_batch_offers_with_their_family(service):
    status, body = _get(service, _skus_path(service), _token(service))
    assert status == 200
    example = json.loads((EXAMPLES / "management-examples" / "LocationListVirtualMachineSkus.json").read_text())
    example_sku = example["responses"]["200"]["body"]["value"][0]
    by_name = {sku["name"]: sku for sku in body["value"]}
    a100 = by_name["Standard_NC24ads_A100_v4"]
    assert set(a100) == set(example_sku)
    assert a100["familyName"] == "StandardNCADSA100v4Family"
    assert {c["name"]: c["value"] for c in a100["capabilities"]}["vCPUs"] == "24"
    # Left out of the region, and refused for a pool.
    assert "Standard_NC4as_T4_v3" not in by_name
    assert "Standard_NC8as_T4_v3" in by_name
    client = BatchClient(
        service.url,
        AzureNamedKeyCredential(service.account_name, service.account_key),
        connection_verify=service.ca_file,
    )
    pool = m.BatchPoolCreateOptions(
        id="t4",
        vm_size="standard_nc4as_t4_v3",
        virtual_machine_configuration=m.VirtualMachineConfiguration(
            image_reference=m.BatchVmImageReference(publisher="canonical", offer="ubuntu-24_04-lts", sku="server"),
            node_agent_sku_id="batch.node.ubuntu 24.04",
        ),
    )
    with pytest.raises(HttpResponseError) as refused:
        client.create_pool(pool)
    assert refused.value.status_code == 400
    assert refused.value.error.code == "InvalidPropertyValue"
    details = {d.key: d.value for d in refused.value.model.error_values}
    assert details["PropertyName"] == "vmSize"
    assert "not available in the region 'westeurope'" in details["Reason"]
    # Another region of this subscription offers nothing here.
    assert _get(service, _skus_path(service, "japaneast"), _token(service)) == (200, {"value": []})


def test_the_account_lists_its_supported_images_to_the_sdk(service):
    client = BatchClient(
        service.url, _credential(service, service.client_id, service.client_secret), connection_verify=service.ca_file
    )
    images = list(client.list_supported_images())
    example = json.loads((EXAMPLES / "spec-examples" / "Pools_ListSupportedImages.json").read_text())
    example_keys = set().union(*(image.keys() for image in example["responses"]["200"]["body"]["value"]))
    assert all(set(image.as_dict()) <= example_keys for image in images)
    references = {(i.image_reference.publisher, i.image_reference.offer, i.image_reference.sku) for i in images}
    assert ("canonical", "ubuntu-24_04-lts", "server") in references
    jammy = next(i for i in images if i.image_reference.sku == "22_04-lts")
    assert jammy.node_agent_sku_id == "batch.node.ubuntu 22.04"
    assert jammy.batch_support_end_of_life.year == 2027
    verified = list(client.list_supported_images(filter="verificationType eq 'unverified'"))
    assert [(i.image_reference.offer, i.verification_type) for i in verified] == [("almalinux-x86_64", "unverified")]


def test_a_principal_without_a_role_is_refused_by_batch_and_by_arm(service):
    credential = _credential(service, service.no_role_client_id, service.no_role_client_secret)
    client = BatchClient(service.url, credential, connection_verify=service.ca_file)
    with pytest.raises(HttpResponseError) as refused:
        list(client.list_jobs())
    assert refused.value.status_code == 403
    assert refused.value.error.code == "AuthorizationFailure"
    assert str(refused.value.error.message).startswith("This request is not authorized to perform this operation.")
    token = credential.get_token(ARM).token
    status, body = _get(service, _account_path(service), token)
    assert status == 403
    assert body["error"]["code"] == "AuthorizationFailed"
    assert body["error"]["message"] == (
        f"The client '{service.no_role_client_id}' with object id '00000000-0000-0000-0000-0000000000b2' does not "
        f"have authorization to perform action 'Microsoft.Batch/batchAccounts/read' over scope "
        f"'{_account_path(service)}' or the scope is invalid. If access was recently granted, please refresh your "
        "credentials."
    )
    # Listing the subscription's accounts is not refused: it holds those the caller may read, none.
    accounts = f"/subscriptions/{service.subscription_id}/providers/Microsoft.Batch/batchAccounts"
    assert _get(service, accounts, token) == (200, {"value": []})


def test_a_reader_of_the_account_alone_cannot_list_the_region_sizes(service):
    token = _token(service, READER_ID, READER_SECRET)
    assert _get(service, _account_path(service), token)[0] == 200
    status, body = _get(service, _skus_path(service), token)
    assert status == 403
    assert "'Microsoft.Batch/locations/virtualMachineSkus/read' over scope '/subscriptions/" in body["error"]["message"]
    # Its token carries who it is: the object id a role assignment names.
    batch_client = BatchClient(
        service.url, _credential(service, READER_ID, READER_SECRET), connection_verify=service.ca_file
    )
    assert list(batch_client.list_jobs()) == []


def test_arm_refuses_what_arm_refuses(service):
    path = _account_path(service)
    status, body = _get(service, path)
    assert (status, body["error"]["code"]) == (401, "AuthenticationFailed")
    # A token for Batch is not one for Resource Manager.
    status, body = _get(service, path, _token(service, scope=BATCH))
    assert (status, body["error"]["code"]) == (401, "InvalidAuthenticationTokenAudience")
    assert "'https://batch.core.windows.net/'" in body["error"]["message"]
    token = _token(service)
    status, body = _get(service, path, token, query="")
    assert (status, body["error"]["code"]) == (400, "MissingApiVersionParameter")
    status, body = _get(service, path.replace(service.subscription_id, "11111111-1111-1111-1111-111111111111"), token)
    assert (status, body["error"]["code"]) == (404, "SubscriptionNotFound")
    status, body = _get(service, _account_path(service, group="other-group"), token)
    assert body == {
        "error": {"code": "ResourceGroupNotFound", "message": "Resource group 'other-group' could not be found."}
    }
    status, body = _get(service, _account_path(service, account="otheraccount"), token)
    assert (status, body["error"]["code"]) == (404, "ResourceNotFound")
    assert body["error"]["message"].startswith(
        "The Resource 'Microsoft.Batch/batchAccounts/otheraccount' under resource group 'local-batch' was not found."
    )


def test_a_user_subscription_account_reports_no_core_quota():
    with run_local_batch_service(
        tls=True, extra_args=["--quiet", "--pool-allocation-mode", "UserSubscription"]
    ) as running:
        status, account = _get(running, _account_path(running), _token(running))
    assert status == 200
    assert account["properties"]["poolAllocationMode"] == "UserSubscription"
    assert not {"dedicatedCoreQuota", "dedicatedCoreQuotaPerVMFamily", "lowPriorityCoreQuota"} & set(
        account["properties"]
    )
