"""Node addresses: each node its own loopback address, outside what the host itself uses."""

from __future__ import annotations

import ipaddress

import pytest

from local_azure_batch.model import addresses
from local_azure_batch.model.addresses import NodeAddresses


def _take(allocator: NodeAddresses, count: int, in_use: frozenset[str] = frozenset()) -> list[str]:
    return [allocator.take(lambda: in_use) for _ in range(count)]


def test_addresses_are_loopback_distinct_and_skip_the_host_parts_no_node_gets():
    taken = _take(NodeAddresses(), 600)
    assert taken[:3] == ["127.1.0.1", "127.1.0.2", "127.1.0.3"]
    assert taken[253:256] == ["127.1.0.254", "127.1.1.1", "127.1.1.2"]
    assert len(set(taken)) == 600
    for text in taken:
        address = ipaddress.ip_address(text)
        assert address.is_loopback
        assert address not in ipaddress.ip_network("127.0.0.0/16")


def test_the_same_requests_give_the_same_addresses():
    assert _take(NodeAddresses(), 10) == _take(NodeAddresses(), 10)


def test_after_the_last_address_the_next_one_no_node_holds(monkeypatch: pytest.MonkeyPatch):
    # A small range stands for the 8 million addresses of 127.1.0.1 - 127.255.255.254.
    monkeypatch.setattr(addresses, "FIRST", int(ipaddress.IPv4Address("127.1.0.1")))
    monkeypatch.setattr(addresses, "LAST", int(ipaddress.IPv4Address("127.1.0.4")))
    allocator = NodeAddresses()
    assert _take(allocator, 4) == ["127.1.0.1", "127.1.0.2", "127.1.0.3", "127.1.0.4"]
    assert _take(allocator, 2, frozenset({"127.1.0.1", "127.1.0.3"})) == ["127.1.0.2", "127.1.0.4"]
    with pytest.raises(RuntimeError, match="every loopback address is held by a compute node"):
        allocator.take(lambda: {f"127.1.0.{n}" for n in range(1, 5)})


def test_a_restored_state_s_nodes_keep_their_addresses_and_new_nodes_come_after_them():
    allocator = NodeAddresses()
    allocator.resume_after(["127.1.0.2", "127.1.0.7"])
    assert _take(allocator, 2) == ["127.1.0.8", "127.1.0.9"]
    allocator.resume_after([])  # nothing restored: the sequence goes on
    assert _take(allocator, 1) == ["127.1.0.10"]
