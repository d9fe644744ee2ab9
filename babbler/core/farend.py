"""The far end of this node's cables: which node is at the other end of each of its links,
from babeld's table and the other nodes' info answers. Pure.

Two kinds of evidence say a node is there:
- babeld's word: a route to a node's own range with refmetric 0 comes from that node
  itself, so the neighbour (address, link) it comes through is that node. Routes through one
  neighbour that name two nodes (a node that has just taken a new node id announces its old
  range a moment longer): the route babeld added last names it.
- the node's own word: its info lists, as a neighbour on one of its links, the link-local
  babeld uses on one of our links (babeld's `interface` entry), naming this node or none
  (it has not learnt yet who we are).

They combine link by link, and babeld's word wins: where babeld names nodes on a link, a
node that only its own info puts there (an answer from before a cable moved) is not at the
far end; where babeld names none yet, every node whose info puts itself there is. A node
both put there is one far end, with its link-locals (babeld's word) and its links (its
own). Parallel cables to one node are one far end per link, each found by its own
link-local. One link-local on two links (set by hand) finds a far end on each of them.

`status` and the info answer take babeld's word alone (no infos): another node's far ends
are found in that answer, and a node must not hand back to it what its own info said.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from ipaddress import IPv6Network
from typing import Any

from babbler.core.addressing import format_node_id, node_id_of
from babbler.core.table import MeshTable


@dataclass(frozen=True)
class FarEnd:
    """A node at the far end of one of this node's links."""

    link: str  # this node's link
    node: str  # the node there, its id as `status` writes it
    addresses: tuple[str, ...] = ()  # its link-locals babeld has on `link` (babeld's word)
    their_links: tuple[str, ...] = ()  # its links facing `link`, as its info says

    @property
    def babeld_knows(self) -> bool:
        """babeld has this node as a neighbour on the link (not only its info says so)."""
        return bool(self.addresses)


def far_ends(
    table: MeshTable,
    infos: Iterable[tuple[str, Mapping[str, Any]]] = (),
    me: str | None = None,
) -> list[FarEnd]:
    """Every node at the far end of one of this node's links, by (link, node). `infos`:
    (node id, node info) of the other nodes (what they say is checked for nothing but
    its shape here); `me`: this node's id, which a listed neighbour must name if it names
    any node (None: only neighbours that name none count)."""
    addresses: dict[tuple[str, str], set[str]] = {}  # (link, node) -> its link-locals
    named: dict[str, set[str]] = {}  # link -> the nodes babeld names there
    for (address, link), node in table.memo("through", _through).items():
        addresses.setdefault((link, node), set()).add(address)
        named.setdefault(link, set()).add(node)

    ours: dict[str, list[str]] = {}  # a link-local babeld uses -> our links with it
    for entry in table.entries("interface"):
        if link_local := entry.field("ipv6"):
            ours.setdefault(link_local, []).append(entry.handle)
    facing: dict[tuple[str, str], set[str]] = {}  # (link, node) -> its links: its word
    for other, info in infos:
        for listed in _dicts(info.get("neighbours")):
            theirs, said = listed.get("interface"), listed.get("address")
            if not isinstance(theirs, str) or not isinstance(said, str):
                continue
            if listed.get("node_id") not in (None, me):
                continue  # facing another node that has our link-local
            for mine in ours.get(said, []):
                if named.get(mine) and other not in named[mine]:
                    continue  # babeld has another node on this link now
                facing.setdefault((mine, other), set()).add(theirs)

    return [
        FarEnd(
            link,
            node,
            tuple(sorted(addresses.get((link, node), ()))),
            tuple(sorted(facing.get((link, node), ()))),
        )
        for link, node in sorted(addresses.keys() | facing.keys())
    ]


def _through(table: MeshTable) -> dict[tuple[str, str], str]:
    """(neighbour address, link) -> the node there, by babeld's word: the last route added
    through it to a node's own range with refmetric 0."""
    out = {}
    for route in table.entries("route"):
        prefix, via, link = route.field("prefix"), route.field("via"), route.field("if")
        if route.field("refmetric") != "0" or prefix is None or via is None or link is None:
            continue
        try:
            node = node_id_of(IPv6Network(prefix, strict=False).network_address)
        except ValueError:
            continue
        if node is not None:
            out[(via, link)] = format_node_id(node)
    return out


def _dicts(value: Any) -> list[Mapping[str, Any]]:
    return [item for item in value if isinstance(item, Mapping)] if isinstance(value, list) else []
