"""What a node reports of its network: ``endpointConfiguration`` and, in a pool that asks for IPv6, its IPv6
addresses.

Shapes as the service's (recorded ``test_batch_compute_nodes`` and ``test_batch_compute_node_extensions``; REST
spec example ``Nodes_Get_DualStackNetworking``, api-version 2025-06-01): one inbound endpoint per inbound NAT pool
of the pool, named ``{natPool}.{n}`` for the pool's n-th node (from 0), its frontend port the range's start plus n;
a pool without NAT pools gets the service's own remote access rule (``SSHRule`` to port 22, ``RDPRule`` to 3389 on
Windows). A pool whose ``publicIPAddressConfiguration.ipFamilies`` holds IPv6 gives each node an ``ipv6Address``
and each rule a ``{natPool}-ipv6.{n}`` twin.

The addresses are the node's own (its loopback address, ``::1`` for IPv6): nothing listens on the frontend ports,
since the local nodes run no SSH or RDP server.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .pools import ComputeNode

IPV6_LOOPBACK = "::1"
# The service's own rule's frontend ports start here ("Ports 50000 to 55000 are reserved", pool_config.py).
DEFAULT_FRONTEND_START = 50000


def asks_for_ipv6(spec: dict[str, Any]) -> bool:
    public = (spec.get("networkConfiguration") or {}).get("publicIPAddressConfiguration") or {}
    return any(str(family).lower() == "ipv6" for family in public.get("ipFamilies") or [])


def _nat_pools(spec: dict[str, Any]) -> list[dict[str, Any]]:
    endpoints = (spec.get("networkConfiguration") or {}).get("endpointConfiguration") or {}
    pools = endpoints.get("inboundNATPools") or []
    if pools:
        return [dict(item) for item in pools]
    windows = (
        str(spec["virtualMachineConfiguration"].get("nodeAgentSKUId", "")).lower().startswith("batch.node.windows")
    )
    name, port = ("RDPRule", 3389) if windows else ("SSHRule", 22)
    return [{"name": name, "protocol": "tcp", "backendPort": port, "frontendPortRangeStart": DEFAULT_FRONTEND_START}]


def endpoint_configuration(node: ComputeNode) -> dict[str, Any]:
    spec = node.pool.spec
    ipv6 = asks_for_ipv6(spec)
    endpoints = []
    for nat in _nat_pools(spec):
        start = int(nat["frontendPortRangeStart"])
        # Node indices start at 1 and only grow; the ports wrap around within the pool's range.
        size = int(nat.get("frontendPortRangeEnd", start + 999)) - start + 1
        slot = (node.index - 1) % size
        base = {
            "protocol": nat["protocol"],
            "publicFQDN": "localhost",
            "frontendPort": start + slot,
            "backendPort": int(nat["backendPort"]),
        }
        endpoints.append({"name": f"{nat['name']}.{slot}", "publicIPAddress": node.ip_address, **base})
        if ipv6:
            endpoints.append({"name": f"{nat['name']}-ipv6.{slot}", "publicIPAddress": IPV6_LOOPBACK, **base})
    return {"inboundEndpoints": endpoints}


def add_network(out: dict[str, Any], node: ComputeNode) -> None:
    """The node's network keys, in a node body being rendered (``ipv6Address`` only where IPv6 was asked for)."""
    if asks_for_ipv6(node.pool.spec):
        out["ipv6Address"] = IPV6_LOOPBACK
    out["endpointConfiguration"] = endpoint_configuration(node)


def remote_login_settings(node: ComputeNode) -> dict[str, Any]:
    """Where SSH would answer: the node's own addresses (REST reference, ``BatchNodeRemoteLoginSettings``)."""
    settings: dict[str, Any] = {"remoteLoginIPAddress": node.ip_address, "remoteLoginPort": 22}
    if asks_for_ipv6(node.pool.spec):
        settings["ipv6RemoteLoginIPAddress"] = IPV6_LOOPBACK
        settings["ipv6RemoteLoginPort"] = 22
    return settings
