"""The other nodes, pure: who is routed, when to ask, what status and watch show."""

from __future__ import annotations

import itertools
from typing import Any

from babbler.core.addressing import format_node_id, interface_address, node_address
from babbler.daemon.nodes.book import (
    DOUBTED,
    FORGET,
    REFRESH,
    RELINKED,
    RETRY,
    STARTING,
    NodeBook,
    events,
    routed,
)

ME, A, B = 0x1, 0xA, 0xB


def route(node: int, metric: int = 32, address: Any = None) -> dict[str, Any]:
    target = node_address(node) if address is None else address
    return {
        "prefix": f"{target}/128",
        "router_id": "02:00:00:00:00:00:00:0a",
        "metric": metric,
        "refmetric": 0,
        "installed": True,
        "via": "fe80::2",
        "interface": "v1x2",
    }


def test_a_node_is_routed_by_its_node_address_only() -> None:
    link_only = route(B, address=interface_address(B, 1))
    retracted = {**route(B), "metric": 65535}
    assert set(routed([route(A), link_only, retracted])) == {A}


def test_asked_when_routed_again_after_refresh_or_retry_and_never_twice_at_once() -> None:
    book = NodeBook(ME)
    book.update_routes([route(A), route(ME)], now=0.0)
    assert book.due(0.0) == [A]  # never ourselves
    book.asking(A, 0.0)
    assert book.due(100.0) == []  # in flight
    book.failed(A, "no answer within 5 s")
    assert book.next_due() == RETRY and book.due(RETRY) == [A]
    book.asking(A, RETRY)
    book.answered(A, {"name": "a", "node_id": format_node_id(A)}, RETRY + 1)
    assert book.next_due() == RETRY + 1 + REFRESH and book.due(RETRY + 2) == []
    book.update_routes([], now=20.0)  # route lost: not asked
    assert book.due(1000.0) == [] and book.next_due() is None
    book.update_routes([route(A)], now=30.0)  # back: asked at once
    assert book.due(30.0) == [A]


def test_the_view_and_its_events() -> None:
    book = NodeBook(ME)
    book.update_routes([route(A, 64), route(B, 32)], now=0.0)
    book.answered(A, {"name": "alpha", "version": "0.1.0", "info": {"role": "w"}}, 1.0)
    first = book.view(2.0)
    assert [n["name"] for n in first] == ["alpha", None]  # named first, then by node id
    assert first[0]["info"] == {"role": "w"} and first[0]["info_age_s"] == 1.0
    assert [e["action"] for e in events([], first)] == ["up", "up"]
    assert events(first, book.view(50.0)) == []  # only ages changed
    book.update_routes([route(A, 96), route(B, 32)], now=60.0)
    changed = events(first, book.view(60.0))
    assert [(e["action"], e["node"]["name"]) for e in changed] == [("changed", "alpha")]
    before = book.view(65.0)
    book.update_routes([route(B, 32)], now=70.0)
    lost = book.view(70.0 + book.hold)  # down once the hold is over
    assert [(n["name"], n["reachable"]) for n in lost] == [(None, True), ("alpha", False)]
    assert [(e["action"], e["node"]["name"]) for e in events(before, lost)] == [("down", "alpha")]
    book.update_routes([route(B, 32)], now=70.0 + FORGET)
    assert [n["node_id"] for n in book.view(70.0 + FORGET)] == [format_node_id(B)]
    gone = events(lost, book.view(70.0 + FORGET))
    assert [(e["action"], e["node"]["reachable"]) for e in gone] == [("down", False)]


def test_an_answer_naming_not_all_its_neighbours_is_asked_again_soon() -> None:
    book = NodeBook(ME)
    book.update_routes([route(A)], now=0.0)
    book.asking(A, 0.0)
    partial = {"name": "a", "neighbours": [{"node_id": None, "interface": "a1"}]}
    book.answered(A, partial, 1.0)
    assert book.next_due() == 1.0 + RETRY
    book.asking(A, 1.0 + RETRY)
    book.answered(A, {"name": "a", "neighbours": [{"node_id": "01", "interface": "a1"}]}, 7.0)
    assert book.next_due() == 7.0 + REFRESH


def test_an_answer_with_a_neighbour_but_no_cable_yet_is_asked_again_soon() -> None:
    """With IPv4 on, every neighbour gets a cable address: an answer that lists fewer cables
    than neighbours was given before the cable was made, and hostfiles need the cable."""
    book = NodeBook(ME)
    book.update_routes([route(A)], now=0.0)
    book.asking(A, 0.0)
    neighbours = [{"node_id": "01", "interface": "a1"}]
    early = {"name": "a", "node_address_v4": "10.77.0.1", "neighbours": neighbours, "cables": []}
    book.answered(A, early, 1.0)
    assert book.next_due() == 1.0 + RETRY
    cable = {"interface": "a1", "address": "10.77.128.0", "peer": "10.77.128.1"}
    book.asking(A, 1.0 + RETRY)
    book.answered(A, {**early, "cables": [cable]}, 7.0)
    assert book.next_due() == 7.0 + REFRESH
    assert book.view(7.0)[0]["cables"] == [cable]
    book.asking(A, 7.0 + REFRESH)  # IPv4 off there: no cable is ever coming
    book.answered(A, {**early, "node_address_v4": None}, 70.0)
    assert book.next_due() == 70.0 + REFRESH


def lists(*neighbours: int) -> dict[str, Any]:
    return {"neighbours": [{"node_id": format_node_id(n), "interface": "x"} for n in neighbours]}


def test_two_answers_that_disagree_about_a_neighbour_are_both_asked_again() -> None:
    """Started one by one: A answered before B came up beside it; B's answer lists A, A's
    does not list B. Both are asked again (A at once, B DOUBTED after its answer) instead of
    REFRESH later; when they keep disagreeing the gap doubles, and agreeing clears it."""
    book = NodeBook(ME)
    book.update_routes([route(A), route(B)], now=0.0)
    book.asking(A, 0.0)
    book.answered(A, lists(ME), 0.5)  # before B was its neighbour
    book.asking(B, 0.0)
    book.answered(B, lists(A), 10.0)
    assert book.due(10.0) == [A]  # A's answer is the older one: at once
    assert book.next_due() == 10.0
    book.asking(A, 10.0)
    book.answered(A, lists(ME), 10.2)  # still not listing B (its babeld is slow)
    assert book.due(10.2) == [] and book.next_due() == 10.0 + DOUBTED  # B, after its answer
    book.asking(B, 11.0)
    book.answered(B, lists(A), 11.1)
    times = {n: book._due_at(k) for n, k in book.nodes.items()}
    assert times == {A: 10.2 + 2 * DOUBTED, B: 11.1 + 2 * DOUBTED}  # the gap doubled
    book.asking(A, 12.2)
    book.answered(A, lists(ME, B), 12.3)  # now it lists B: both agree
    times = {n: book._due_at(k) for n, k in book.nodes.items()}
    assert times == {A: 12.3 + REFRESH, B: 11.1 + REFRESH}


def test_a_node_that_answered_while_starting_is_asked_again_as_it_ages() -> None:
    """Two nodes asked before they met list neither: nothing disagrees. An answer from a
    node still starting is asked again after half its uptime (at least DOUBTED)."""
    book = NodeBook(ME)
    book.update_routes([route(A)], now=0.0)
    asked_at = []
    now, uptime = 0.0, 0.5
    while now < 100:
        book.asking(A, now)
        book.answered(A, {**lists(ME), "uptime_s": uptime}, now)
        due = book.next_due()
        assert due is not None
        asked_at.append(round(due, 1))
        uptime += due - now
        now = due
    young = [t for t in asked_at if t < STARTING]
    assert young[:2] == [1.0, 2.0] and 5 <= len(young) <= 9, asked_at  # uptime / 2 apart
    gaps = [b - a for a, b in itertools.pairwise(asked_at)]
    assert gaps[len(young) :] == [REFRESH] * len(gaps[len(young) :]), asked_at


def test_a_node_without_a_route_stays_reachable_for_the_hold_then_goes_down() -> None:
    """A pulled ring cable: the route goes and comes back within the hold, and neither the
    view nor the events ever say the node left. A node really cut off goes down after it."""
    book = NodeBook(ME, hold=1.0)
    book.update_routes([route(A), route(B)], now=0.0)
    for node in (A, B):
        book.asking(node, 0.0)
        book.answered(node, {"name": str(node), "uptime_s": 100}, 0.0)
    before = book.view(0.0)
    book.update_routes([route(A)], now=10.0)  # B's route is gone for a moment
    held = {n["node_id"]: n for n in book.view(10.4)}[format_node_id(B)]
    assert held["reachable"] and held["route_lost_s"] == 0.4 and held["last_seen_s"] is None
    assert held["metric"] is None  # no route to tell one
    assert [e["action"] for e in events(before, book.view(10.4))] == ["changed"]
    assert book.next_change() == 11.0  # the service wakes when the hold runs out
    book.update_routes([route(A), route(B, metric=96)], now=10.3)  # back the other way
    back = book.view(10.5)
    assert all(n["reachable"] and n["route_lost_s"] is None for n in back)
    assert "down" not in [e["action"] for e in events(before, back)]
    book.update_routes([route(A)], now=20.0)  # cut off for good
    cut = {n["node_id"]: n for n in book.view(32.0)}[format_node_id(B)]
    assert not cut["reachable"] and cut["last_seen_s"] == 12.0 and cut["route_lost_s"] is None
    assert [e["action"] for e in events(back, book.view(32.0))] == ["down"]
    book.stopped = True  # the mesh stopped: nothing is held
    assert not any(n["reachable"] for n in book.view(20.1) if n["node_id"] != format_node_id(A))


def test_a_node_whose_links_changed_is_asked_again_soon() -> None:
    """A cable pulled at A takes the route to that link's address: A is asked again
    RELINKED later, not REFRESH later, so its neighbours (the picture, `path`) follow."""
    book = NodeBook(ME)
    link = route(A, address=interface_address(A, 1))
    book.update_routes([route(A), link], now=0.0)
    book.asking(A, 0.0)
    book.answered(A, {"neighbours": []}, 0.5)
    book.update_routes([route(A), link, route(A, metric=64)], now=10.0)  # same links
    assert book.next_due() == 0.5 + REFRESH
    book.update_routes([route(A)], now=20.0)  # the link's address is gone
    assert book.next_due() == 20.0 + RELINKED and book.due(20.0 + RELINKED) == [A]
    book.asking(A, 21.0)
    book.answered(A, {"neighbours": []}, 21.1)
    assert book.next_due() == 21.1 + REFRESH  # once
    book.update_routes([route(A), link], now=30.0)  # and back
    assert book.due(30.0 + RELINKED) == [A]
