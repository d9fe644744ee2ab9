"""The far end of this node's cables (core/farend.py): babeld's word and the other nodes'
infos, each alone and combined as the module says; status's view of neighbours agrees."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from babbler.core import views
from babbler.core.addressing import format_node_id, node_range
from babbler.core.farend import FarEnd, far_ends
from babbler.core.table import MeshTable
from tests.unit.recorded import table_of

ME = 0x1A2B3C4D5E6F
OURS = {"tb0": "fe80::1", "tb1": "fe80::2", "en2": "fe80::3"}  # our links' link-locals


def babeld_table(
    link_locals: Mapping[str, str], routes: Iterable[tuple[int, str, str, int]]
) -> MeshTable:
    """babeld's table: our links with their link-locals, and routes (node, via, link,
    refmetric) to each node's own range, in the order babeld added them."""
    lines = [f"add interface {name} up true ipv6 {ll}" for name, ll in link_locals.items()]
    lines += [
        f"add route r{i} prefix {node_range(node)} from ::/0 installed yes id 0:0:0:0:0:0:0:{i} "
        f"metric {96 + refmetric} refmetric {refmetric} via {via} if {link}"
        for i, (node, via, link, refmetric) in enumerate(routes)
    ]
    return table_of(*lines)


def info(*listed: tuple[str | None, str, str]) -> dict[str, Any]:
    """A node's info listing neighbours as (node id named, its link, the address)."""
    return {
        "neighbours": [{"node_id": n, "interface": i, "address": a} for n, i, a in listed],
        "interfaces": [{"name": i, "max_mtu": 9000} for _, i, _ in listed],
    }


A, B, C, D = (format_node_id(n) for n in (0xA, 0xB, 0xC, 0xD))


def test_each_word_alone_and_both_together() -> None:
    me = format_node_id(ME)
    table = babeld_table(
        OURS,
        [
            (0xA, "fe80::a", "tb0", 0),  # A on tb0: babeld's word
            (0xA, "fe80::a", "tb0", 0),
            (0xD, "fe80::a", "tb0", 96),  # D's range relayed through A: not a far end
            (0xC, "fe80::c", "en2", 0),  # C on en2, an old node id of C's ...
            (0xB, "fe80::c", "en2", 0),  # ... then its new one, added last: it names C
        ],
    )
    infos = [
        (A, info((None, "tb9", "fe80::1"), (None, "eth0", "fe80::99"))),  # A says so too
        (B, info((me, "en7", "fe80::2"))),  # B on tb1: babeld names nobody there
        (D, info((None, "en5", "fe80::1"))),  # D once faced tb0: babeld has A there now
        (C, info((D, "en8", "fe80::2"))),  # faces a node that has tb1's link-local: not us
    ]
    assert far_ends(table, infos, me) == [
        FarEnd("en2", B, ("fe80::c",)),
        FarEnd("tb0", A, ("fe80::a",), ("tb9",)),
        FarEnd("tb1", B, (), ("en7",)),
    ]
    assert far_ends(table) == [FarEnd("en2", B, ("fe80::c",)), FarEnd("tb0", A, ("fe80::a",))]
    assert views.neighbour_nodes(table) == {("fe80::c", "en2"): B, ("fe80::a", "tb0"): A}
    # One link-local on two links (set by hand): a far end on each that has nobody else.
    twice = babeld_table({"tb0": "fe80::1", "tb1": "fe80::1"}, [(0xA, "fe80::a", "tb0", 0)])
    ends = far_ends(twice, [(D, info((None, "x", "fe80::1")))])
    assert [(e.link, e.node) for e in ends] == [("tb0", A), ("tb1", D)]


# A world to check far_ends against: cables from our links to other nodes, each known to
# babeld or not, said by the far node's info or not; and stale claims (a node's info naming
# one of our link-locals on a link it no longer faces).
LINKS = sorted(OURS)
NODES = [0xA, 0xB, 0xC, 0xD]


@dataclass(frozen=True)
class Cable:
    link: str  # ours
    node: int
    theirs: str  # its link
    babeld: bool  # babeld has a route to its range with refmetric 0 through it
    says: str  # its info lists our link-local: naming "none", "me" or "other"; or "silent"


cables = st.builds(
    Cable,
    st.sampled_from(LINKS),
    st.sampled_from(NODES),
    st.sampled_from(["t0", "t1", "t2"]),
    st.booleans(),
    st.sampled_from(["none", "me", "other", "silent"]),
)
claims = st.tuples(st.sampled_from(NODES), st.sampled_from(LINKS), st.sampled_from(["s0", "s1"]))


@given(st.lists(cables, max_size=8), st.lists(claims, max_size=4), st.randoms())
def test_babelds_word_wins_and_the_infos_fill_in(
    world: list[Cable], stale: list[tuple[int, str, str]], random: Any
) -> None:
    me = format_node_id(ME)
    via = {c: f"fe80::{c.node:x}:{i}" for i, c in enumerate(world)}  # its link-local
    routes = [(c.node, via[c], c.link, 0) for c in world if c.babeld]
    # babeld relays every node's range through every neighbour, refmetric > 0
    routes += [(n, via[c], c.link, 96) for c in world if c.babeld for n in NODES]
    random.shuffle(routes)
    named = {"none": None, "me": me, "other": format_node_id(0xE)}
    listed: dict[int, list[tuple[str | None, str, str]]] = {n: [] for n in NODES}
    for c in world:
        if c.says != "silent":
            listed[c.node].append((named[c.says], c.theirs, OURS[c.link]))
    for node, link, theirs in stale:
        listed[node].append((None, theirs, OURS[link]))
    infos = [(format_node_id(n), info(*listed[n])) for n in NODES]
    table = babeld_table(OURS, routes)
    found = far_ends(table, infos, me)

    by_babeld = {(c.link, format_node_id(c.node)) for c in world if c.babeld}
    claimed: dict[tuple[str, str], set[str]] = {}
    for node, entries in listed.items():
        for who, theirs, address in entries:
            if who != named["other"]:
                link = next(name for name, ll in OURS.items() if ll == address)
                claimed.setdefault((link, format_node_id(node)), set()).add(theirs)
    assert len({(e.link, e.node) for e in found}) == len(found) == len(set(found))  # one each
    for link in LINKS:
        there = {e.node for e in found if e.link == link}
        known = {node for (on, node) in by_babeld if on == link}
        if known:  # babeld's word wins: who else an info puts there is not
            assert there == known
        else:  # babeld names nobody: every node whose info puts itself there
            assert there == {node for (on, node) in claimed if on == link}
    for end in found:
        assert set(end.addresses) == {
            via[c]
            for c in world
            if c.babeld and (c.link, format_node_id(c.node)) == (end.link, end.node)
        }
        assert set(end.their_links) == claimed.get((end.link, end.node), set())
    # status and the info answer: babeld's word alone, the same with or without infos
    alone = [FarEnd(e.link, e.node, e.addresses) for e in found if e.babeld_knows]
    assert far_ends(table) == alone
    assert views.neighbour_nodes(table) == {(a, e.link): e.node for e in alone for a in e.addresses}
