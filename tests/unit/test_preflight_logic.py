"""The preflight's pure parts: who a token names, which image and quota lines it writes, the report's text."""

from __future__ import annotations

import base64
import json
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

import pytest

from airflow_provider_azbatch.hooks.connection import AuthMethod
from airflow_provider_azbatch.hooks.management import BatchAccountInfo, VmSku
from airflow_provider_azbatch.preflight.capacity import AccountView, Unreadable, image_finding, quota_finding
from airflow_provider_azbatch.preflight.fixes import Where
from airflow_provider_azbatch.preflight.identity import token_claims, token_identity
from airflow_provider_azbatch.preflight.render import render_text
from airflow_provider_azbatch.preflight.report import PreflightReport, Status, failed, ok, unknown, warning
from airflow_provider_azbatch.preflight.run import _region_of
from airflow_provider_azbatch.preflight.targets import PoolTarget

WHERE = Where("acct", "https://acct.westeurope.batch.azure.com", "sub", "rg", "westeurope")
NOBLE = {"publisher": "canonical", "offer": "ubuntu-24_04-lts", "sku": "server", "version": "latest"}


def _jwt(claims: dict) -> str:
    def part(value: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    return f"{part({'alg': 'RS256'})}.{part(claims)}.c2lnbmF0dXJl"


def _image(publisher, offer, sku, agent, verification="verified", end=None):
    reference = SimpleNamespace(publisher=publisher, offer=offer, sku=sku)
    return SimpleNamespace(
        image_reference=reference,
        node_agent_sku_id=agent,
        verification_type=verification,
        batch_support_end_of_life=end,
    )


def _target(**fields) -> PoolTarget:
    values = {"label": "t", "kind": "auto", "vm_size": "standard_d2s_v5", "image": NOBLE}
    values.update(node_agent="batch.node.ubuntu 24.04", max_nodes=4)
    return PoolTarget(**{**values, **fields})


def test_a_token_is_read_for_its_claims_only():
    claims = {"tid": "t", "oid": "o", "appid": "a", "idtyp": "app"}
    assert token_claims(_jwt(claims)) == claims
    assert token_claims("opaque-token") == {}
    assert token_claims("a.!!!.c") == {}


def test_a_user_token_names_the_user_for_a_role_assignment():
    settings = SimpleNamespace(auth_method=AuthMethod.DEFAULT, tenant_id=None, client_id=None)
    identity = token_identity(settings, {"tid": "t", "oid": "o", "upn": "ada@contoso.com", "idtyp": "user"})
    assert (identity.principal_type, identity.description) == ("User", "user ada@contoso.com, object id o, tenant t")
    app = token_identity(settings, {"tid": "t", "oid": "o", "azp": "app-id"})
    assert (app.principal_type, app.description) == (
        "ServicePrincipal",
        "DefaultAzureCredential app-id, object id o, tenant t",
    )


@pytest.mark.parametrize(
    ("images", "status", "detail"),
    [
        (
            [_image("Canonical", "ubuntu-24_04-lts", "SERVER", "batch.node.ubuntu 24.04")],
            Status.OK,
            "image canonical:ubuntu-24_04-lts:server is offered (verified, node agent batch.node.ubuntu 24.04)",
        ),
        (
            [_image("canonical", "ubuntu-24_04-lts", "server", "batch.node.ubuntu 24.04", "unverified")],
            Status.WARNING,
            "image canonical:ubuntu-24_04-lts:server is listed as unverified: Batch does not check that it works with "
            "node agent 'batch.node.ubuntu 24.04'",
        ),
        (
            [_image("canonical", "ubuntu-24_04-lts", "server", "batch.node.ubuntu 22.04")],
            Status.FAILED,
            "image canonical:ubuntu-24_04-lts:server is offered with node agent batch.node.ubuntu 22.04, not "
            "'batch.node.ubuntu 24.04'",
        ),
        (
            [
                _image(
                    "canonical",
                    "ubuntu-24_04-lts",
                    "server",
                    "batch.node.ubuntu 24.04",
                    end=datetime(2020, 1, 1, tzinfo=timezone.utc),
                )
            ],
            Status.FAILED,
            "Batch stopped accepting pools of image canonical:ubuntu-24_04-lts:server on 2020-01-01",
        ),
    ],
)
def test_the_image_line(images, status, detail):
    finding = image_finding(_target(), images, WHERE)
    assert (finding.check, finding.status, finding.detail) == ("pool[t].image", status, detail)


def test_a_gallery_image_is_known_by_its_node_agent_only():
    gallery = "/subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/galleries/x/images/y"
    images = [_image("canonical", "ubuntu-24_04-lts", "server", "batch.node.ubuntu 24.04")]
    supported = image_finding(_target(image={"virtualMachineImageId": gallery}), images, WHERE)
    foreign = image_finding(
        _target(image={"virtualMachineImageId": gallery}, node_agent="batch.node.centos 7"), images, WHERE
    )
    assert supported.status is Status.UNKNOWN
    assert supported.fix.startswith("make sure the image is replicated to region westeurope")
    assert foreign.status is Status.FAILED
    assert foreign.fix == "build the image for a supported node agent (batch.node.ubuntu 24.04) and name it"


def _view(**properties) -> AccountView:
    account = BatchAccountInfo.from_json(
        {
            "id": "/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Batch/batchAccounts/acct",
            "name": "acct",
            "location": "westeurope",
            "properties": {"accountEndpoint": "acct.westeurope.batch.azure.com", **properties},
        }
    )
    skus = {"standard_d2s_v5": VmSku("Standard_D2s_v5", "standardDSv5Family", 2, True)}
    return AccountView(account, skus)


def test_the_quota_line():
    enforced = _view(
        dedicatedCoreQuota=100,
        dedicatedCoreQuotaPerVMFamily=[{"name": "standardDSv5Family", "coreQuota": 6}],
        dedicatedCoreQuotaPerVMFamilyEnforced=True,
        lowPriorityCoreQuota=4,
    )
    too_few = quota_finding(_target(), enforced, WHERE)
    assert too_few.status is Status.FAILED
    assert too_few.detail == (
        "the pool needs 8 dedicated vCPUs (4 nodes x 2 vCPUs of Standard_D2s_v5, family standardDSv5Family); Batch "
        "account 'acct' has a quota of 6 for standardDSv5Family"
    )
    assert too_few.fix.endswith("not the subscription's), or lower max_nodes to 3")
    spot = quota_finding(_target(low_priority=True), enforced, WHERE)
    assert spot.detail.startswith("the pool needs 8 spot vCPUs")
    assert spot.detail.endswith("has a quota of 4 for any family")
    # A family the account has no quota for, under per-family enforcement: none.
    missing = _view(dedicatedCoreQuota=100, dedicatedCoreQuotaPerVMFamilyEnforced=True)
    assert quota_finding(_target(), missing, WHERE).detail.endswith("has a quota of 0 for standardDSv5Family")
    assert "lower max_nodes" not in quota_finding(_target(), missing, WHERE).fix
    user = quota_finding(_target(), _view(poolAllocationMode="UserSubscription"), WHERE)
    assert user.status is Status.UNKNOWN
    assert user.fix.startswith("compare with az vm list-usage --location westeurope --output table")
    unreadable = AccountView(Unreadable("no", "ask"))
    assert quota_finding(_target(), unreadable, WHERE).status is Status.UNKNOWN


def test_the_text_report():
    report = PreflightReport("c", "acct", "https://acct.westeurope.batch.azure.com")
    report.add(ok("connection", "fine"))
    report.add(failed("storage.account", "missing", fix="set it"))
    report.add(warning("x", "odd", fix="look"))
    report.add(unknown("y", "unread", fix="grant"))
    assert render_text(report).splitlines() == [
        "Preflight of connection 'c': Batch account 'acct' at https://acct.westeurope.batch.azure.com",
        "",
        "ok       connection: fine",
        "FAILED   storage.account: missing",
        "         fix: set it",
        "warning  x: odd",
        "         fix: look",
        "unknown  y: unread",
        "         fix: grant",
        "",
        "Not ready: 1 ok, 1 failed, 1 warning, 1 unknown (exit 1)",
    ]
    assert report.to_json()["counts"] == {"ok": 1, "failed": 1, "warning": 1, "unknown": 1}


def test_the_region_of_an_account_url():
    assert _region_of("https://acct.westeurope.batch.azure.com") == "westeurope"
    assert _region_of("https://127.0.0.1:8443") is None
    assert _region_of("https://acct.usgovvirginia.batch.usgovcloudapi.net") == "usgovvirginia"


def test_an_end_of_support_ahead_is_said():
    end = datetime.now(timezone.utc) + timedelta(days=400)
    images = [_image("canonical", "ubuntu-24_04-lts", "server", "batch.node.ubuntu 24.04", end=end)]
    assert image_finding(_target(), images, WHERE).detail.endswith(f"; Batch supports it until {end:%Y-%m-%d}")
