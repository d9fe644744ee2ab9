"""This node's own info pushed on change (daemon/nodes/own.py) and other nodes' pushes taken
by the book (daemon/nodes/book.py): nothing is sent while nothing changes, each change
reaches each routed node once, an older version never replaces a newer one."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from babbler.core.addressing import format_node_id, node_address
from babbler.daemon.nodes.book import FLAP, NodeBook
from babbler.daemon.nodes.own import GRACE, RETRY, SETTLE, OwnInfo

A, B, C = 0xA1, 0xB2, 0xC3


def info(uptime: float = 1.0, name: str = "n1") -> dict[str, Any]:
    return {"node_id": format_node_id(A), "name": name, "uptime_s": uptime, "neighbours": []}


def test_the_version_grows_with_what_changes_and_not_with_uptime() -> None:
    own = OwnInfo()
    first = own.stamp(info(1.0), now=0.0)
    assert first["serial"] == 1 and len(first["run"]) == 16
    assert own.stamp(info(2.0), now=1.0)["serial"] == 1  # uptime alone: the same version
    assert own.stamp(info(3.0, name="n9"), now=2.0)["serial"] == 2
    assert OwnInfo().run != own.run  # each start its own run


def test_nothing_is_pushed_while_nothing_changes() -> None:
    own = OwnInfo()
    own.stamp(info(), now=0.0)
    routed = {B: 0.0, C: 0.0}
    own.held(B, 1)  # B asked and was answered
    own.held(C, 1)
    for now in (1.0, 10.0, 1000.0):
        own.stamp(info(now), now)
        assert own.due(routed, now) == [] and own.next_due(routed) is None


def test_a_change_is_pushed_once_to_each_node_that_holds_an_older_one() -> None:
    own = OwnInfo()
    own.stamp(info(), now=0.0)
    own.held(B, 1)
    own.held(C, 1)
    own.stamp(info(name="renamed"), now=5.0)
    routed = {B: 0.0, C: 0.0}
    assert own.due(routed, 5.0) == []  # changes come in bursts: wait SETTLE
    assert own.next_due(routed) == 5.0 + SETTLE
    assert sorted(own.due(routed, 5.0 + SETTLE)) == [B, C]
    own.held(B, 2)
    own.failed(C, 6.0)
    assert own.due(routed, 6.0 + RETRY - 0.1) == []
    assert own.due(routed, 6.0 + RETRY) == [C]
    own.held(C, 2)
    assert own.due(routed, 100.0) == []


def test_a_node_just_routed_is_given_time_to_ask_itself() -> None:
    own = OwnInfo()
    own.stamp(info(), now=0.0)
    routed = {B: 10.0}
    assert own.due(routed, 10.0 + GRACE - 0.1) == []
    own.held(B, 1)  # it asked
    assert own.due(routed, 10.0 + GRACE) == []
    routed[C] = 20.0  # one that never asks is pushed to
    assert own.due(routed, 20.0 + GRACE) == [C]
    own.forget({C})  # the book forgot B (gone for good)
    assert B not in own.holds


def test_a_route_back_within_a_flap_costs_one_push_not_an_ask() -> None:
    """Routes that come and go (a churning mesh) are not asked again on each return: the
    node pushes what we lack as its route to us comes back, at once, not after RETRY."""
    book = NodeBook(A)
    book.update_routes([_route(B), _route(C)], now=0.0)
    for node in (B, C):
        book.asking(node, 0.0)
    assert book.answered(B, _versioned(B, "b" * 16, 1, "bee"), now=0.1)
    assert book.answered(C, {"node_id": format_node_id(C), "name": "old"}, now=0.1)
    book.update_routes([], now=10.0)  # both routes go
    book.update_routes([_route(B), _route(C)], now=10.0 + FLAP - 0.1)  # and come back
    assert book.due(10.0 + FLAP) == [C]  # C has no version: asked; B pushes
    book.update_routes([], now=20.0)
    book.update_routes([_route(B)], now=20.0 + FLAP)  # gone FLAP: asked
    assert book.due(20.0 + FLAP) == [B]
    book.asking(B, 30.0)
    assert book.answered(B, _versioned(B, "b" * 16, 2, "bee"), now=30.1)
    book.update_routes([], now=40.0)  # gone, and its push comes meanwhile: refused...
    assert not book.pushed(B, _versioned(B, "b" * 16, 3, "new mtu"), now=40.5)
    book.update_routes([_route(B)], now=41.0)  # ...so back within FLAP, it is asked
    assert book.due(41.0) == [B]

    # B's side: its push to A failed while the route went; A's route came back: pushed now
    own = OwnInfo()
    own.stamp(info(), now=0.0)
    own.held(A, 1)
    own.stamp(info(name="renamed"), now=5.0)
    own.failed(A, 5.5)
    assert own.due({A: 0.0}, 6.0) == []  # the route never went: RETRY after the failure
    assert own.due({A: 7.0}, 7.0) == [A]  # it came back at 7: no RETRY


def _route(node: int) -> dict[str, Any]:
    return {"prefix": f"{node_address(node)}/128", "installed": "yes", "metric": 96}


def _versioned(node: int, run: str, serial: int, name: str) -> dict[str, Any]:
    return {"node_id": format_node_id(node), "name": name, "run": run, "serial": serial}


def test_the_book_takes_pushes_from_routed_nodes_and_never_an_older_version() -> None:
    book = NodeBook(A)
    book.update_routes([_route(B)], now=0.0)
    assert book.due(0.0) == [B]
    book.asking(B, 0.0)
    assert book.answered(B, _versioned(B, "a" * 16, 1, "first"), now=0.1)
    assert book.due(1000.0) == []  # it pushes its changes: never asked again by time
    assert book.pushers() == {B: 0.0}
    assert book.pushed(B, _versioned(B, "a" * 16, 3, "third"), now=1.0)
    assert not book.pushed(B, _versioned(B, "a" * 16, 2, "second"), now=1.1)  # late
    assert book.view(2.0)[0]["name"] == "third"
    assert book.pushed(B, _versioned(B, "b" * 16, 1, "restarted"), now=3.0)  # a new run
    assert book.view(3.0)[0]["name"] == "restarted"
    assert not book.pushed(C, _versioned(C, "c" * 16, 1, "unrouted"), now=3.0)
    assert [n["node_id"] for n in book.view(3.0)] == [format_node_id(B)]


def test_a_node_without_versions_is_still_asked_every_refresh() -> None:
    book = NodeBook(A)
    book.update_routes([_route(B)], now=0.0)
    book.asking(B, 0.0)
    old = {"node_id": format_node_id(B), "name": "old", "uptime_s": 100.0}
    assert book.answered(B, old, now=0.1)
    assert not book.pushed(B, old, now=0.2)  # a push must carry a version
    assert book.pushers() == {}  # and it is never pushed to (it would refuse)
    due = book.next_due()
    assert due is not None and due <= 60.1


@given(st.lists(st.integers(min_value=1, max_value=20), min_size=1, max_size=30))
def test_whatever_order_versions_arrive_in_the_newest_stays(serials: list[int]) -> None:
    book = NodeBook(A)
    book.update_routes([_route(B)], now=0.0)
    for number, serial in enumerate(serials):
        book.pushed(B, _versioned(B, "d" * 16, serial, f"v{serial}"), now=float(number))
    assert book.view(100.0)[0]["name"] == f"v{max(serials)}"
