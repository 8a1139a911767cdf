"""Whether the pools a run would make fit the account: the image offered (Batch's own list of supported images),
the VM size offered in the account's region and the account's vCPU quota for its family (both through Resource
Manager, when the credential may read them; "unknown" with the reason when it may not)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from azure.core.exceptions import HttpResponseError, ServiceRequestError, ServiceResponseError

from airflow_provider_azbatch.hooks.errors import describe_error, error_code, root_cause
from airflow_provider_azbatch.hooks.management import BATCH_SERVICE, BatchAccountInfo, VmSku
from airflow_provider_azbatch.preflight.fixes import READER_ROLE, Where, assign_role
from airflow_provider_azbatch.preflight.report import Finding, Identity, failed, ok, unknown, warning
from airflow_provider_azbatch.preflight.targets import PoolTarget

ACCOUNT = "management.account"


@dataclass
class Unreadable:
    """Why something of Resource Manager could not be read, and how to make it readable."""

    why: str
    fix: str


# The supported images cannot be listed when Batch refused the connection (its own lines say why).
REFUSED = Unreadable("the Batch account refused the connection (see above)", "fix the lines above first")


@dataclass
class AccountView:
    """What Resource Manager said about the account and its region, or why it could not say."""

    account: BatchAccountInfo | Unreadable
    skus: dict[str, VmSku] | Unreadable | None = None
    findings: list[Finding] = field(default_factory=list)


# -- images (the Batch data plane) ----------------------------------------------------------------------


def image_finding(target: PoolTarget, images: Sequence[Any] | Unreadable, where: Where) -> Finding:
    check = f"pool[{target.label}].image"
    if isinstance(images, Unreadable):
        return unknown(check, f"the account's supported images could not be listed: {images.why}", fix=images.fix)
    image, agent = target.image, target.node_agent or ""
    listed_agents = sorted({str(item.node_agent_sku_id) for item in images})
    if not image.get("publisher"):
        source = next(iter(image.values()), "")
        if agent.lower() not in {name.lower() for name in listed_agents}:
            return failed(
                check,
                f"node agent '{agent}' of image {source} is not one Batch account '{where.account_name}' supports",
                fix=f"build the image for a supported node agent ({', '.join(listed_agents)}) and name it",
            )
        return unknown(
            check,
            f"{source} is a gallery or custom image: Batch lists Marketplace images only (its node agent '{agent}' "
            "is supported)",
            fix=f"make sure the image is replicated to region {where.location_or_placeholder} and readable by the "
            "Batch account (a pool of it is refused or fails to allocate otherwise)",
        )
    wanted = (image["publisher"].lower(), image["offer"].lower(), image["sku"].lower())
    named = f"{image['publisher']}:{image['offer']}:{image['sku']}"
    matches = [item for item in images if _reference(item) == wanted]
    listing = (
        f"az batch pool supported-images list --account-name {where.account_name} --account-endpoint "
        f"{where.account_url} --output table"
    )
    if not matches:
        return failed(
            check,
            f"image {named} is not offered by Batch account '{where.account_name}' (not among its supported images): "
            "its nodes would fail to allocate",
            fix=f"choose an image it lists ({listing}): requirements os_image 'ubuntu-24.04' picks one, or "
            "PoolImage.marketplace(...) with a listed publisher, offer and sku",
        )
    same_agent = [item for item in matches if str(item.node_agent_sku_id).lower() == agent.lower()]
    if not same_agent:
        agents = ", ".join(sorted({str(item.node_agent_sku_id) for item in matches}))
        return failed(
            check,
            f"image {named} is offered with node agent {agents}, not '{agent}'",
            fix=f"set node_agent_sku_id='{agents.split(', ')[0]}' on the PoolImage",
        )
    item = same_agent[0]
    end = getattr(item, "batch_support_end_of_life", None)
    if end is not None and end <= datetime.now(timezone.utc):
        return failed(
            check,
            f"Batch stopped accepting pools of image {named} on {end:%Y-%m-%d}",
            fix="move to an image it still supports (requirements os_image 'ubuntu-24.04')",
        )
    verification = str(getattr(item.verification_type, "value", item.verification_type) or "")
    if verification == "unverified":
        return warning(
            check,
            f"image {named} is listed as unverified: Batch does not check that it works with node agent '{agent}'",
            fix="prefer a verified image (requirements os_image 'ubuntu-24.04')",
        )
    until = f"; Batch supports it until {end:%Y-%m-%d}" if end is not None else ""
    return ok(check, f"image {named} is offered ({verification or 'listed'}, node agent {agent}){until}")


def _reference(item: Any) -> tuple[str, str, str]:
    ref = item.image_reference
    return (str(ref.publisher or "").lower(), str(ref.offer or "").lower(), str(ref.sku or "").lower())


def listing_problem(exc: BaseException, what: str) -> Unreadable:
    if isinstance(exc, (ServiceRequestError, ServiceResponseError)):
        return Unreadable(f"{what}: {root_cause(exc)}", "try again when the service is reachable")
    return Unreadable(f"{what}: {describe_error(exc)}", "try again; if it persists, look at the message")


# -- the management plane -------------------------------------------------------------------------------


def arm_problem(exc: BaseException, what: str, identity: Identity | None, where: Where, scope: str) -> Unreadable:
    """Why a Resource Manager read failed, and what makes it readable."""
    if isinstance(exc, (ServiceRequestError, ServiceResponseError)):
        return Unreadable(
            f"cannot reach Resource Manager to read {what}: {root_cause(exc)}",
            "check that this machine reaches Resource Manager (a proxy goes in HTTPS_PROXY), or resource_manager_url",
        )
    code = error_code(exc) or ""
    if code == "AuthorizationFailed":
        return Unreadable(
            f"the identity may not read {what} (AuthorizationFailed)",
            f"assign it {READER_ROLE} there: {assign_role(READER_ROLE, identity, scope)}",
        )
    if code in ("SubscriptionNotFound", "ResourceGroupNotFound", "ResourceNotFound"):
        return Unreadable(
            f"{what} is not where the connection says ({describe_error(exc)})",
            f"set subscription_id and resource_group to the account's: az batch account show --name "
            f"{where.account_name} --resource-group <its group> --query id",
        )
    if isinstance(exc, HttpResponseError):
        return Unreadable(f"Resource Manager refused to read {what}: {describe_error(exc)}", "look at the message")
    message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return Unreadable(
        f"no token for Resource Manager: {message}",
        "an identity that can get tokens for Resource Manager is needed (the connection's Entra ID credential, or "
        "--management-credential default)",
    )


def account_finding(view: AccountView, where: Where) -> Finding:
    account = view.account
    if isinstance(account, Unreadable):
        return unknown(
            ACCOUNT, f"the Batch account's quotas and region could not be read: {account.why}", fix=account.fix
        )
    return ok(
        ACCOUNT,
        f"Batch account '{account.name}' in region {account.location} (resource group {account.resource_group}), "
        f"pool allocation mode {account.pool_allocation_mode}",
    )


def vm_size_finding(target: PoolTarget, view: AccountView, where: Where) -> Finding:
    check = f"pool[{target.label}].vm_size"
    size = target.vm_size or ""
    skus = view.skus
    if isinstance(view.account, Unreadable):
        return unknown(check, f"whether {size} is offered in the account's region is unknown", fix=view.account.fix)
    if isinstance(skus, Unreadable):
        return unknown(check, f"the region's VM sizes could not be listed: {skus.why}", fix=skus.fix)
    if skus is None:
        return unknown(check, "the region's VM sizes were not listed", fix="check again")
    sku = skus.get(size.lower())
    location = view.account.location
    listing = f"az batch location list-skus --location {location} --output table"
    if sku is None:
        return failed(
            check,
            f"VM size {size} is not offered to Batch in region {location}",
            fix=f"choose a size Batch offers there ({listing}): other requirements, or vm_size=; or use a Batch "
            "account in a region that offers it",
        )
    if target.low_priority and not sku.low_priority_capable:
        return failed(
            check,
            f"VM size {sku.name} cannot be a spot node in region {location}",
            fix=f"drop low_priority from the requirements, or choose a size with spot nodes ({listing})",
        )
    vcpus = f", {sku.vcpus} vCPUs" if sku.vcpus else ""
    return ok(check, f"VM size {sku.name} is offered to Batch in region {location} (family {sku.family}{vcpus})")


def quota_finding(target: PoolTarget, view: AccountView, where: Where) -> Finding:
    check = f"pool[{target.label}].quota"
    account, skus = view.account, view.skus
    if isinstance(account, Unreadable):
        return unknown(check, "the account's vCPU quota could not be read", fix=account.fix)
    if account.pool_allocation_mode != BATCH_SERVICE:
        return unknown(
            check,
            "the account allocates pools in your subscription (user subscription mode): its vCPUs count against "
            "the subscription's regional quota, not the account's",
            fix=f"compare with az vm list-usage --location {account.location} --output table; request more in the "
            "Azure portal (Subscriptions, Usage + quotas)",
        )
    sku = skus.get((target.vm_size or "").lower()) if isinstance(skus, dict) else None
    if sku is None or not sku.vcpus:
        reason = skus.why if isinstance(skus, Unreadable) else "its VM size is not offered in the region"
        fix = skus.fix if isinstance(skus, Unreadable) else "choose a size the region offers (see the vm_size line)"
        return unknown(check, f"the VM family and vCPUs of {target.vm_size} are unknown: {reason}", fix=fix)
    need = sku.vcpus * target.max_nodes
    nodes = f"{target.max_nodes} node{'s' if target.max_nodes != 1 else ''} x {sku.vcpus} vCPUs of {sku.name}"
    kind, family, limit = _limit(account, sku, target.low_priority)
    if limit is None:
        return unknown(check, f"the account reports no {kind} vCPU quota", fix="look at the account's Quotas page")
    if need > limit:
        fewer = math.floor(limit / sku.vcpus)
        lower = f", or lower max_nodes to {fewer}" if fewer >= 1 else ""
        return failed(
            check,
            f"the pool needs {need} {kind} vCPUs ({nodes}, family {sku.family}); Batch account "
            f"'{account.name}' has a quota of {limit} for {family}",
            fix=f"{_request(need, kind, sku.family)}{lower}",
        )
    return ok(
        check,
        f"needs {need} of the account's {limit} {kind} vCPUs for {family} ({nodes}; shared with its other pools)",
    )


def family_findings(targets: Sequence[PoolTarget], view: AccountView) -> list[Finding]:
    """The vCPUs of the pools that share a quota, summed: a family's dedicated vCPUs, or the spot vCPUs of all.

    A line only where two pools or more share one: each pool's own line says whether it fits alone.
    """
    account, skus = view.account, view.skus
    if isinstance(account, Unreadable) or not isinstance(skus, dict) or account.pool_allocation_mode != BATCH_SERVICE:
        return []
    shared: dict[tuple[str, str], list[tuple[PoolTarget, VmSku]]] = {}
    for target in targets:
        sku = skus.get((target.vm_size or "").lower())
        if target.problem is None and target.unknown_because is None and sku is not None and sku.vcpus:
            kind, family, _ = _limit(account, sku, target.low_priority)
            shared.setdefault((kind, family), []).append((target, sku))
    findings = []
    for (kind, family), pools in shared.items():
        if len(pools) < 2:
            continue
        _, _, limit = _limit(account, pools[0][1], pools[0][0].low_priority)
        need = sum(int(sku.vcpus or 0) * target.max_nodes for target, sku in pools)
        labels = "; ".join(f"{target.label}: {int(sku.vcpus or 0) * target.max_nodes}" for target, sku in pools)
        check = f"quota[{family if kind == 'dedicated' else 'spot'}]"
        if limit is None:
            continue
        if need > limit:
            findings.append(
                failed(
                    check,
                    f"{len(pools)} pools need {need} {kind} vCPUs of {family} together at their largest ({labels}); "
                    f"Batch account '{account.name}' has a quota of {limit}",
                    fix=f"{_request(need, kind, family)}, or lower the pools' max_nodes",
                )
            )
        else:
            findings.append(
                ok(
                    check,
                    f"{len(pools)} pools need {need} of the {limit} {kind} vCPUs for {family} together ({labels})",
                )
            )
    return findings


def _limit(account: BatchAccountInfo, sku: VmSku, low_priority: bool) -> tuple[str, str, int | None]:
    """The quota a pool of ``sku`` counts against: (dedicated or spot, what it covers, the vCPUs)."""
    if low_priority:
        return "spot", "any family", account.low_priority_core_quota
    per_family = {name.lower(): quota for name, quota in account.family_quotas.items()}
    family_quota = per_family.get(sku.family.lower(), 0 if account.family_quotas_enforced else None)
    limits = [quota for quota in (family_quota, account.dedicated_core_quota) if quota is not None]
    return "dedicated", sku.family, min(limits) if limits else None


def _request(need: int, kind: str, family: str) -> str:
    return (
        f"request at least {need} {kind} vCPUs for {family} (Azure portal, the Batch account, Quotas, Request quota "
        "increase; the quota is per Batch account, not the subscription's)"
    )
