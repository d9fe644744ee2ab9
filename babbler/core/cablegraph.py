"""The cables of the mesh, from `status` alone (pure): which link of which node faces which
link of which node, parallel cables included.

Each node lists its cable addresses, `{"interface", "address", "peer"}` (this node in
`status.addresses_v4`, the others in `status.nodes[].cables`, from their node info). A cable
is two such ends that name each other: A's address is B's peer and B's address is A's peer.
An end whose far end has not said so (its info is older than the cable, or lost) is no
cable yet. Cables between two nodes are ordered by cost (the dearer end's link), then by
the lower node's address on it: the first is the best.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from ipaddress import IPv4Address
from typing import Any

from babbler.core import rdma
from babbler.core.cost import UNKNOWN_COST
from babbler.core.printable import escape

INTERFACE = re.compile(r"^[A-Za-z0-9_.:-]{1,15}$")  # what Linux and macOS allow, and no more


@dataclass(frozen=True, order=True)
class End:
    node_id: str
    interface: str
    address: IPv4Address


@dataclass(frozen=True)
class Cable:
    near: End  # the end on the node with the lower node id
    far: End
    cost: int

    def end_on(self, node_id: str) -> End:
        return self.near if self.near.node_id == node_id else self.far

    def end_facing(self, node_id: str) -> End:
        """The other end: the one not on `node_id`."""
        return self.far if self.near.node_id == node_id else self.near


@dataclass(frozen=True)
class Host:
    """A node as a hostfile needs it."""

    node_id: str
    name: str | None  # None: it has not answered for its info yet
    node_address: str
    node_address_v4: str | None
    reachable: bool
    me: bool = False
    # RDMA over Thunderbolt ready for jaccl (macOS 26.2+, rdma_ctl enabled, a device on each
    # Thunderbolt cable: core/rdma.py), from the node's `status.rdma` or node info `rdma`;
    # None: not known (not a Mac, or not read yet).
    rdma_ready: bool | None = None


@dataclass
class CableGraph:
    me: str
    hosts: dict[str, Host] = field(default_factory=dict)  # by node id
    cables: dict[frozenset[str], list[Cable]] = field(default_factory=dict)  # by node pair

    @classmethod
    def from_status(cls, status: Mapping[str, Any]) -> CableGraph:
        me = str(status["node_id"])
        graph = cls(me)
        graph.hosts[me] = Host(
            me,
            status.get("name") or None,
            str(status.get("node_address")),
            _ipv4(status.get("node_address_v4")),
            reachable=True,
            me=True,
            rdma_ready=rdma.ready(status.get("rdma")),
        )
        ends: list[tuple[End, IPv4Address, int]] = []
        ends += _ends(me, status.get("addresses_v4"), _costs(status.get("interfaces")))
        for node in status.get("nodes") or []:
            if not isinstance(node, Mapping) or node.get("node_id") in (None, me):
                continue
            ident = str(node["node_id"])
            answered = node.get("name") is not None or node.get("version") is not None
            graph.hosts[ident] = Host(
                ident,
                _text(node.get("name")) if answered else None,
                str(node.get("node_address")),
                _ipv4(node.get("node_address_v4")) if answered else None,
                node.get("reachable") is True,
                rdma_ready=rdma.ready(node.get("rdma")) if answered else None,
            )
            ends += _ends(ident, node.get("cables"), _costs(node.get("links")))
        graph._match(ends)
        return graph

    def _match(self, ends: list[tuple[End, IPv4Address, int]]) -> None:
        by_pair: dict[tuple[IPv4Address, IPv4Address], list[tuple[End, int]]] = {}
        for end, peer, cost in ends:
            by_pair.setdefault((end.address, peer), []).append((end, cost))
        for (address, peer), found in by_pair.items():
            facing = by_pair.get((peer, address), [])
            if len(found) != 1 or len(facing) != 1:  # no far end, or two cables share a /31
                continue
            (a, cost_a), (b, cost_b) = found[0], facing[0]
            if a.node_id >= b.node_id:  # each cable once, from its lower node's end
                continue
            pair = frozenset((a.node_id, b.node_id))
            self.cables.setdefault(pair, []).append(Cable(a, b, max(cost_a, cost_b)))
        for cables in self.cables.values():
            cables.sort(key=lambda c: (c.cost, c.near.address))

    def between(self, a: str, b: str) -> list[Cable]:
        """The cables between two nodes, best first."""
        return self.cables.get(frozenset((a, b)), [])

    def label(self, node_id: str) -> str:
        """The node as messages name it: its name (escaped: it came from the node) or id."""
        host = self.hosts.get(node_id)
        return escape((host.name if host else None) or node_id)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _ipv4(value: object) -> str | None:
    """An IPv4 address as written, or None for anything else (a far node may say anything)."""
    try:
        return str(IPv4Address(value)) if isinstance(value, str) else None
    except ValueError:
        return None


def _costs(links: object) -> dict[str, int]:
    if not isinstance(links, list):
        return {}
    out = {}
    for link in links:
        if isinstance(link, Mapping) and isinstance(link.get("name"), str):
            cost = link.get("cost")
            out[link["name"]] = cost if isinstance(cost, int) else UNKNOWN_COST
    return out


def _ends(
    node_id: str, listed: object, costs: dict[str, int]
) -> list[tuple[End, IPv4Address, int]]:
    """The well-formed cable ends a node lists (a far node's info may say anything)."""
    if not isinstance(listed, list):
        return []
    out = []
    for item in listed:
        interface = item.get("interface") if isinstance(item, Mapping) else None
        if not isinstance(interface, str) or not INTERFACE.match(interface):
            continue
        try:
            address, peer = IPv4Address(str(item["address"])), IPv4Address(str(item["peer"]))
        except (KeyError, ValueError):
            continue
        out.append((End(node_id, interface, address), peer, costs.get(interface, UNKNOWN_COST)))
    return out
