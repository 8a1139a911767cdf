"""The IP addresses of compute nodes: each node its own loopback address, so nodes can reach each other.

On Linux the whole of 127.0.0.0/8 is this machine's: a process can listen on ``127.1.0.2`` and another
connect to it without configuring anything, and no packet leaves the machine. So the instances of a
multi-instance task find each other through the addresses Batch gives them (``AZ_BATCH_MASTER_NODE``,
``AZ_BATCH_HOST_LIST``), as on a pool with inter-node communication.

Addresses start at ``127.1.0.1``: ``127.0.x.x`` is left alone because the host uses parts of it
(``127.0.0.1``, ``127.0.0.53`` for a local resolver, ``127.0.1.1`` for the host name on Debian). Host
parts ``.0`` and ``.255`` are skipped, as no real subnet hands them to a node. Nodes are numbered in the
order the service allocates them, so within one service process every node's address is its own and
the same requests give the same addresses.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Collection, Iterable

FIRST = int(ipaddress.IPv4Address("127.1.0.1"))
LAST = int(ipaddress.IPv4Address("127.255.255.254"))


class NodeAddresses:
    def __init__(self) -> None:
        self._next = FIRST
        self._wrapped = False

    def take(self, in_use: Callable[[], Collection[str]]) -> str:
        """The next address; once every address was handed out, the next one no node holds (``in_use``)."""
        held: Collection[str] = ()
        for _ in range(LAST - FIRST + 1):
            address = self._advance()
            if not self._wrapped:
                return address
            held = held or in_use()
            if address not in held:
                return address
        raise RuntimeError("every loopback address is held by a compute node")

    def resume_after(self, addresses: Iterable[str]) -> None:
        """Hand out addresses after the highest of ``addresses`` (the nodes of a state loaded at start)."""
        held = [int(ipaddress.IPv4Address(address)) for address in addresses]
        if held and max(held) >= self._next:
            self._next = max(held) + 1 if max(held) < LAST else FIRST
            self._wrapped = self._wrapped or max(held) >= LAST

    def _advance(self) -> str:
        while True:
            value = self._next
            if value >= LAST:
                self._next, self._wrapped = FIRST, True
            else:
                self._next = value + 1
            if value & 0xFF not in (0, 0xFF):
                return str(ipaddress.IPv4Address(value))
