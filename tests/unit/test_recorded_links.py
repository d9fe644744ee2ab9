"""Eligibility over link snapshots recorded from real kernels (tests/unit/data/*.json, made
with record_links.py): a virtio NIC and ifb links in a VM's root namespace; veth, a bridge
and a bridge port in a namespace."""

from __future__ import annotations

import json
from ipaddress import IPv6Address
from pathlib import Path

from babbler.core.links import Link, Links, Selector, usable_names

DATA = Path(__file__).parent / "data"


def load(name: str) -> Links:
    links = json.loads((DATA / name).read_text())
    return {
        d["name"]: Link(**{**d, "addresses": frozenset(map(IPv6Address, d["addresses"]))})
        for d in links
    }


def selected(snapshot: Links, selector: Selector) -> set[str]:
    return {name for name, link in snapshot.items() if selector.selects(link)}


def test_a_virtio_nic_is_physical_and_ifb_and_loopback_are_not() -> None:
    host = load("links-virtio-host.json")
    assert selected(host, Selector()) == {"eth0"}
    assert usable_names(host, Selector()) == {"eth0"}
    assert host["eth0"].category == "ethernet"
    assert host["ifb0"].category == "other"


def test_veth_bridges_and_bridge_ports_are_never_picked_by_default() -> None:
    lab = load("links-virtual-kinds.json")
    assert selected(lab, Selector()) == set()
    assert lab["v1x3"].master == lab["br0"].index


def test_interface_globs_take_virtual_links_whatever_their_kind_and_exclude_wins() -> None:
    lab = load("links-virtual-kinds.json")
    assert usable_names(lab, Selector(interface=("v*",))) == {"v1x2", "v1x3"}
    assert usable_names(lab, Selector(interface=("v*", "br*"), exclude=("v1x3",))) == {
        "v1x2",
        "br0",
    }
