"""What the nodes will not reach, read through Resource Manager where Airflow can see it: the storage account's
public network access and network rules (nodes fetch workspaces and functions through SAS URLs, from their own
addresses, not Airflow's), and for a pool in a virtual network its subnet, whether the connection's identity may
join it, and the outbound rules of its network security group (simplified node communication: TCP 443 out to the
``BatchNodeManagement.<region>`` service tag).

Each failed line names the ``az`` command that fixes it; docs/howto/networking.md explains them.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from typing import Any

from azure.core.exceptions import ResourceNotFoundError

from airflow_provider_azbatch.hooks.management import ResourceManager
from airflow_provider_azbatch.hooks.storage import storage_account_name
from airflow_provider_azbatch.preflight.capacity import Unreadable, arm_problem
from airflow_provider_azbatch.preflight.fixes import (
    NETWORK_ROLE,
    READER_ROLE,
    Where,
    assign_role,
    resource_group_of,
    storage_scope,
)
from airflow_provider_azbatch.preflight.management import Management
from airflow_provider_azbatch.preflight.nsg import outbound_finding
from airflow_provider_azbatch.preflight.report import Finding, failed, ok, unknown, warning
from airflow_provider_azbatch.preflight.targets import PoolTarget

STORAGE_NETWORK = "storage.network"
STORAGE_API = "2023-05-01"
NETWORK_API = "2024-05-01"
AUTHORIZATION_API = "2022-04-01"
JOIN_ACTION = "Microsoft.Network/virtualNetworks/subnets/join/action"


def network_findings(
    management: Management,
    where: Where,
    storage_url: str | None,
    pools: Sequence[PoolTarget],
    needed_by: Sequence[str] | None,
) -> list[Finding]:
    """The storage line (when a storage account is set and some task may need it), then each subnet's lines."""
    manager = management.manager
    if isinstance(manager, Unreadable):
        return []  # the management.account line, when pools are checked, says why Resource Manager is not read
    findings: list[Finding] = []
    vnet_pools = [pool for pool in pools if pool.subnet_id]
    if storage_url and (needed_by is None or needed_by):
        findings.append(_storage(manager, management, where, storage_url, pools, needed_by))
    for pool in vnet_pools:
        findings += _subnet(manager, management, where, pool)
    return findings


# -- the storage account ----------------------------------------------------------------------------------


def _storage(
    manager: ResourceManager,
    management: Management,
    where: Where,
    url: str,
    pools: Sequence[PoolTarget],
    needed_by: Sequence[str] | None,
) -> Finding:
    name = storage_account_name(url)
    path = f"/subscriptions/{management.subscription_id}/providers/Microsoft.Storage/storageAccounts"
    try:
        account = next((item for item in manager.resources(path, STORAGE_API) if item.get("name") == name), None)
    except Exception as exc:
        unreadable = arm_problem(
            exc, "the subscription's storage accounts", management.identity, where, where.subscription_scope
        )
        return unknown(
            STORAGE_NETWORK,
            f"whether the nodes reach storage account '{name}' is unknown: {unreadable.why}",
            fix=unreadable.fix,
        )
    if account is None:
        return unknown(
            STORAGE_NETWORK,
            f"storage account '{name}' is not among the storage accounts of subscription "
            f"{management.subscription_id} the identity may read: whether the nodes reach it is unknown",
            fix=f"assign the identity {READER_ROLE} on it: "
            f"{assign_role(READER_ROLE, management.identity, storage_scope(name))}",
        )
    problem = _refused(account, pools)
    if problem is None:
        return ok(STORAGE_NETWORK, _accepted(account, pools))
    detail, fix = problem
    users = f"tasks that need it ({', '.join(needed_by)}) would fail" if needed_by else "a task that needs it fails"
    finding = failed if needed_by else warning
    return finding(STORAGE_NETWORK, f"{detail}: {users}", fix=fix)


def _refused(account: dict[str, Any], pools: Sequence[PoolTarget]) -> tuple[str, str] | None:
    """Why the nodes of ``pools`` (any pool, when none is known) cannot reach the account, and the fix."""
    name, group = str(account.get("name")), resource_group_of(str(account.get("id", "")))
    properties = account.get("properties") or {}
    update = f"az storage account update --name {name} --resource-group {group}"
    if str(properties.get("publicNetworkAccess", "Enabled")).lower() == "disabled":
        private = [c for c in properties.get("privateEndpointConnections") or [] if _approved(c)]
        if private and pools and all(pool.subnet_id for pool in pools):
            return None  # reached through its private endpoints: the subnets' DNS is not visible from here
        where = "the pools are in no virtual network" if not private else "not every pool is in a virtual network"
        return (
            f"storage account '{name}' refuses public network access and {where}, while the nodes fetch workspaces "
            "and functions through SAS URLs from their own addresses",
            f"{update} --public-network-access Enabled (or reach it through a private endpoint from the pools' "
            "subnet: docs/howto/networking.md)",
        )
    acls = properties.get("networkAcls") or {}
    if str(acls.get("defaultAction", "Allow")).lower() != "deny":
        return None
    allowed = {
        str(rule.get("id", "")).lower()
        for rule in acls.get("virtualNetworkRules") or []
        if str(rule.get("action", "Allow")).lower() == "allow"
    }
    outside = [pool.label for pool in pools if not pool.subnet_id]
    if outside or not pools:
        labels = ", ".join(outside) or "a pool in no virtual network"
        return (
            f"storage account '{name}' accepts only the networks its rules list (default action Deny), and the "
            f"nodes of {labels} get public addresses from Batch that no rule can list",
            f"{update} --default-action Allow, or put the pools in a subnet the account allows: "
            f"az storage account network-rule add --account-name {name} --resource-group {group} --subnet <subnet id>",
        )
    denied = [pool for pool in pools if str(pool.subnet_id).lower() not in allowed]
    if not denied:
        return None
    subnet = denied[0].subnet_id
    return (
        f"storage account '{name}' accepts only the networks its rules list (default action Deny), and subnet "
        f"{subnet} of pool {', '.join(pool.label for pool in denied)} is not among them",
        f"az storage account network-rule add --account-name {name} --resource-group {group} --subnet {subnet} "
        f"(the subnet needs the Microsoft.Storage service endpoint: az network vnet subnet update --ids {subnet} "
        "--service-endpoints Microsoft.Storage)",
    )


def _accepted(account: dict[str, Any], pools: Sequence[PoolTarget]) -> str:
    properties = account.get("properties") or {}
    name = account.get("name")
    if str(properties.get("publicNetworkAccess", "Enabled")).lower() == "disabled":
        return f"storage account '{name}' is reached through its private endpoints, from the pools' subnets"
    acls = properties.get("networkAcls") or {}
    if str(acls.get("defaultAction", "Allow")).lower() == "deny":
        return f"storage account '{name}' allows the subnets of the pools checked ({len(pools)})"
    return f"storage account '{name}' accepts the nodes' connections (public network access on, no network rule)"


def _approved(connection: dict[str, Any]) -> bool:
    state = (connection.get("properties") or {}).get("privateLinkServiceConnectionState") or {}
    return str(state.get("status", "Approved")).lower() == "approved"


# -- a pool's subnet ----------------------------------------------------------------------------------------


def _subnet(manager: ResourceManager, management: Management, where: Where, pool: PoolTarget) -> list[Finding]:
    check = f"pool[{pool.label}].subnet"
    subnet_id = str(pool.subnet_id)
    try:
        subnet = manager.resource(subnet_id, NETWORK_API)
    except ResourceNotFoundError:
        parts, group = subnet_id.split("/"), resource_group_of(subnet_id)
        return [
            failed(
                check,
                f"subnet {subnet_id} does not exist: Batch refuses to create the pool",
                fix=f"create it: az network vnet subnet create --resource-group {group} --vnet-name "
                f"{parts[-3]} --name {parts[-1]} --address-prefixes <a free range, e.g. 10.0.1.0/24>",
            )
        ]
    except Exception as exc:
        problem = arm_problem(exc, f"subnet {subnet_id}", management.identity, where, subnet_id)
        return [unknown(check, f"the subnet could not be read: {problem.why}", fix=problem.fix)]
    findings = [_join(manager, management, where, pool, subnet)]
    nsg = ((subnet.get("properties") or {}).get("networkSecurityGroup") or {}).get("id")
    if nsg:
        findings.append(outbound_finding(manager, management, where, pool, str(nsg)))
    return findings


def _join(
    manager: ResourceManager, management: Management, where: Where, pool: PoolTarget, subnet: dict[str, Any]
) -> Finding:
    check = f"pool[{pool.label}].subnet"
    subnet_id = str(pool.subnet_id)
    prefix = (subnet.get("properties") or {}).get("addressPrefix")
    named = f"subnet {subnet.get('name', subnet_id)}{f' ({prefix})' if prefix else ''}"
    fix = f"assign it {NETWORK_ROLE} on the subnet: {assign_role(NETWORK_ROLE, management.identity, subnet_id)}"
    if management.identity is None:
        return unknown(
            check,
            f"{named} exists; whether the connection's identity may join it is unknown (Resource Manager was read "
            "with another credential)",
            fix=f"make sure the connection's identity may join it ({JOIN_ACTION}): {fix}",
        )
    try:
        permissions = list(
            manager.resources(f"{subnet_id}/providers/Microsoft.Authorization/permissions", AUTHORIZATION_API)
        )
    except Exception as exc:
        problem = arm_problem(exc, f"the identity's permissions on {subnet_id}", management.identity, where, subnet_id)
        return unknown(check, f"{named} exists; {problem.why}", fix=problem.fix)
    if not any(_allows(entry, JOIN_ACTION) for entry in permissions):
        return failed(
            check,
            f"{management.identity.description} may not join {named} ({JOIN_ACTION}): Batch refuses to create a pool "
            "in it for this identity",
            fix=fix,
        )
    return ok(check, f"{named} exists and {management.identity.description} may join it")


def _allows(entry: dict[str, Any], action: str) -> bool:
    def matches(patterns: Any) -> bool:
        return any(fnmatch.fnmatchcase(action.lower(), str(pattern).lower()) for pattern in patterns or [])

    return matches(entry.get("actions")) and not matches(entry.get("notActions"))
