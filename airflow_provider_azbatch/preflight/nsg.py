"""A pool subnet's network security group, read as Azure applies it to the nodes' outbound traffic.

Nodes in simplified node communication (the only mode after classic's retirement on 31 March 2026) need TCP 443
out to the ``BatchNodeManagement.<region>`` service tag, and to Storage for the SAS URLs of their task files. The
rules are taken in priority order, the lowest number first, custom and default rules alike; the first that
matches TCP 443 to the service tag decides. A rule naming addresses (not a tag) is not taken to match: what those
addresses hold is not known here.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_azbatch.hooks.management import ResourceManager
from airflow_provider_azbatch.preflight.capacity import arm_problem
from airflow_provider_azbatch.preflight.fixes import Where, resource_group_of
from airflow_provider_azbatch.preflight.management import Management
from airflow_provider_azbatch.preflight.report import Finding, failed, ok, unknown
from airflow_provider_azbatch.preflight.targets import PoolTarget

NETWORK_API = "2024-05-01"
PORT = 443


def outbound_finding(
    manager: ResourceManager, management: Management, where: Where, pool: PoolTarget, nsg_id: str
) -> Finding:
    check = f"pool[{pool.label}].nsg"
    nsg_name = nsg_id.rstrip("/").rsplit("/", 1)[-1]
    try:
        nsg = manager.resource(nsg_id, NETWORK_API)
    except Exception as exc:
        problem = arm_problem(exc, f"network security group {nsg_name}", management.identity, where, nsg_id)
        return unknown(check, f"the subnet's network security group could not be read: {problem.why}", fix=problem.fix)
    region = where.location_or_placeholder
    properties = nsg.get("properties") or {}
    rules = sorted(
        [*(properties.get("securityRules") or []), *(properties.get("defaultSecurityRules") or [])],
        key=lambda rule: int((rule.get("properties") or {}).get("priority", 65500)),
    )
    blocked = []
    for service in ("BatchNodeManagement", "Storage"):
        deciding = next((rule for rule in rules if _matches(rule, service, region)), None)
        if deciding is not None and str(deciding["properties"].get("access", "")).lower() == "deny":
            blocked.append((service, deciding))
    if not blocked:
        return ok(
            check,
            f"network security group {nsg_name} lets the nodes reach BatchNodeManagement.{region} and Storage.{region} "
            f"on TCP {PORT}",
        )
    service, rule = blocked[0]
    priority = int(rule["properties"].get("priority", 65500))
    tags = ", ".join(f"{name}.{region}" for name, _ in blocked)
    group = resource_group_of(nsg_id)
    return failed(
        check,
        f"rule {rule.get('name')} (priority {priority}) of network security group {nsg_name} denies TCP {PORT} out to "
        f"{tags}: the nodes cannot reach {'Batch node management' if service == 'BatchNodeManagement' else 'storage'}"
        " and stay unusable",
        fix=" ; ".join(
            f"az network nsg rule create --resource-group {group} --nsg-name {nsg_name} --name Allow{name}Outbound "
            f"--priority {max(100, priority - 1 - index)} --direction Outbound --access Allow --protocol Tcp "
            f"--destination-address-prefixes {name}.{region} --destination-port-ranges {PORT}"
            for index, (name, _) in enumerate(blocked)
        ),
    )


def _matches(rule: dict[str, Any], service: str, region: str) -> bool:
    properties = rule.get("properties") or {}
    if str(properties.get("direction", "")).lower() != "outbound":
        return False
    if str(properties.get("protocol", "*")).lower() not in ("*", "tcp"):
        return False
    prefixes = [properties.get("destinationAddressPrefix"), *(properties.get("destinationAddressPrefixes") or [])]
    covering = {"*", "internet", service.lower(), f"{service}.{region}".lower()}
    if not any(str(prefix).lower() in covering for prefix in prefixes if prefix):
        return False
    ports = [properties.get("destinationPortRange"), *(properties.get("destinationPortRanges") or [])]
    return any(_in_range(str(port), PORT) for port in ports if port)


def _in_range(text: str, port: int) -> bool:
    if text == "*":
        return True
    low, _, high = text.partition("-")
    try:
        return int(low) <= port <= int(high or low)
    except ValueError:
        return False
