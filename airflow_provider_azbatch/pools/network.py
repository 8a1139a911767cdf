"""Where a pool's nodes sit on the network: a virtual network subnet, and how they get public IP addresses.

Rules from the Batch documentation, checked before anything is created:

- a subnet is an ARM id ``/subscriptions/<sub>/resourceGroups/<rg>/providers/Microsoft.Network/virtualNetworks/
  <vnet>/subnets/<subnet>`` in the Batch account's subscription and region;
- nodes without public IP addresses, and nodes with your own public IPs, need a subnet ("create your pool in an
  Azure virtual network", simplified-node-communication-pool-no-public-ip, create-pool-public-ip);
- each public IP of your own serves up to 100 dedicated and 100 Spot nodes;
- a pool in a virtual network must be created with Microsoft Entra ID authentication ("To use an Azure VNet, the
  Batch client API must use Microsoft Entra authentication"): a shared key connection is refused.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_azbatch.pools.errors import PoolStrategyError

SUBNET_ID = re.compile(
    r"/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.Network/virtualNetworks/[^/]+/subnets/[^/]+",
    re.IGNORECASE,
)
PUBLIC_IP_ID = re.compile(
    r"/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.Network/publicIPAddresses/[^/]+",
    re.IGNORECASE,
)
PUBLIC_IPS = ("batch", "none")
NODES_PER_PUBLIC_IP = 100


@dataclass(frozen=True)
class PoolNetwork:
    """``PoolNetwork(subnet_id="/subscriptions/.../subnets/batch", public_ips="none")``.

    :param subnet_id: the virtual network subnet the nodes join.
    :param public_ips: ``"batch"`` (Batch gives each node a public IP, the service's default), ``"none"`` (no public
        IP: outbound access and the node management endpoint must come through the virtual network), or a list of
        public IP resource ids of your own (one per 100 nodes).
    :param accelerated_networking: turn accelerated networking on (or off); ``None`` leaves the service's default.
    """

    subnet_id: str | None = None
    public_ips: str | Sequence[str] = "batch"
    accelerated_networking: bool | None = None
    _ips: tuple[str, ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.subnet_id is not None and (
            not isinstance(self.subnet_id, str) or not SUBNET_ID.fullmatch(self.subnet_id.strip())
        ):
            raise PoolStrategyError(
                f"network.subnet_id {self.subnet_id!r} is not a subnet id: give /subscriptions/<subscription>/"
                "resourceGroups/<group>/providers/Microsoft.Network/virtualNetworks/<network>/subnets/<subnet>"
            )
        ips = self.public_ips
        if isinstance(ips, str):
            if ips not in PUBLIC_IPS:
                raise PoolStrategyError(
                    f"network.public_ips must be 'batch', 'none' or a list of public IP resource ids, got {ips!r}"
                )
        else:
            if not isinstance(ips, Sequence) or not ips:
                raise PoolStrategyError(
                    f"network.public_ips must be 'batch', 'none' or a non-empty list of public IP ids, got {ips!r}"
                )
            for index, item in enumerate(ips):
                if not isinstance(item, str) or not PUBLIC_IP_ID.fullmatch(item.strip()):
                    raise PoolStrategyError(
                        f"network.public_ips[{index}] {item!r} is not a public IP id: give /subscriptions/"
                        "<subscription>/resourceGroups/<group>/providers/Microsoft.Network/publicIPAddresses/<name>"
                    )
            object.__setattr__(self, "_ips", tuple(item.strip() for item in ips))
        if self.subnet_id is None and ips != "batch":
            what = "nodes without public IP addresses" if ips == "none" else "public IP addresses of your own"
            raise PoolStrategyError(
                f"network: {what} need a virtual network (the Batch docs: create the pool in an Azure virtual "
                "network): give subnet_id"
            )
        if self.accelerated_networking is not None and not isinstance(self.accelerated_networking, bool):
            raise PoolStrategyError(
                f"network.accelerated_networking must be True, False or None, got {self.accelerated_networking!r}"
            )

    @property
    def in_virtual_network(self) -> bool:
        return self.subnet_id is not None

    def check_size(self, max_nodes: int) -> None:
        """Own public IPs: each serves at most 100 dedicated and 100 Spot nodes."""
        if self._ips and max_nodes > NODES_PER_PUBLIC_IP * len(self._ips):
            needed = math.ceil(max_nodes / NODES_PER_PUBLIC_IP)
            enough = NODES_PER_PUBLIC_IP * len(self._ips)
            raise PoolStrategyError(
                f"network.public_ips lists {len(self._ips)} public IP(s), enough for {enough} "
                f"nodes, but the pool may grow to max_nodes={max_nodes}: give at least {needed}"
            )

    def to_rest(self) -> dict[str, Any]:
        """The pool's ``networkConfiguration``."""
        out: dict[str, Any] = {}
        if self.subnet_id is not None:
            out["subnetId"] = self.subnet_id.strip()
        if self.public_ips == "none":
            out["publicIPAddressConfiguration"] = {"provision": "nopublicipaddresses"}
        elif self._ips:
            out["publicIPAddressConfiguration"] = {"provision": "usermanaged", "ipAddressIds": list(self._ips)}
        if self.accelerated_networking is not None:
            out["enableAcceleratedNetworking"] = self.accelerated_networking
        return out
