"""`babblerctl watch` for people: a line per change that matters, nothing for the rest."""

from __future__ import annotations

from typing import Any

from babbler.client.model import Change, Lost, NodeEvent, Snapshot, parse_event
from babbler.ui.watchview import WatchView, as_json
from tests.unit.samples import typed

N3 = {"node_id": "000000000003", "name": "n3", "reachable": True, "interface": "v1x2", "hops": 2}


def snapshot() -> Snapshot:
    return Snapshot(typed({"name": "n1", "interfaces": [{"name": "v1x2"}], "nodes": [N3]}))


def node(action: Any, **fields: Any) -> NodeEvent:
    return NodeEvent(action, typed({"nodes": [{**N3, **fields}]}).nodes[0])


def test_a_line_per_change_that_matters() -> None:
    view = WatchView()
    said = view.lines(snapshot())
    assert said == ["n1: mesh running, 0 neighbours, 1 of 1 other nodes reachable"]
    rerouted = node("changed", interface="v1x4", metric=96)
    assert view.lines(rerouted) == ["n3 now via v1x4 (metric 96), 2 hops"]
    assert view.lines(node("changed", interface="v1x4", metric=128)) == []  # same way
    assert view.lines(node("down", reachable=False)) == ["n3 down"]
    link = Change("interfaces", None, [{"name": "v1x2", "up": False}])
    assert view.lines(link) == ["link v1x2 down"]
    rtt = Change("neighbour", "change", {"address": "fe80::2", "interface": "v1x2", "rtt": 3.0})
    assert view.lines(rtt) == []
    lost = view.lines(Lost("babblerd closed the connection (/run/babbler/babblerd.sock)"))
    assert lost == [
        "babblerd closed the connection (/run/babbler/babblerd.sock); waiting for it to come back"
    ]
    assert view.lines(snapshot())[0].startswith("babblerd is back: n1:")


def test_nodes_only_and_json_round_trip() -> None:
    view = WatchView(only_nodes=True)
    view.lines(snapshot())
    assert view.lines(Change("interfaces", None, [{"name": "v1x2", "up": False}])) == []
    event = node("up")
    assert view.lines(event) == ["n3 up via v1x2, 2 hops"]
    line = as_json(event)
    assert line is not None and parse_event(line) == event
    assert as_json(Lost("x")) is None


def test_a_neighbour_met_and_lost_is_said_the_same_way_with_its_name_once_known() -> None:
    view = WatchView()
    view.lines(snapshot())
    v3x2 = {"address": "fe80::3", "interface": "v1x2"}
    assert view.lines(Change("neighbour", "add", v3x2)) == ["neighbour met on v1x2 (fe80::3)"]
    known = Change("neighbour", "change", {**v3x2, "node_id": "000000000003"})
    assert view.lines(known) == ["neighbour on v1x2 (fe80::3) is n3"]  # a route from it said
    assert view.lines(known) == []  # said once
    assert view.lines(Change("neighbour", "flush", v3x2)) == ["neighbour n3 lost on v1x2 (fe80::3)"]
    named = Change("neighbour", "add", {**v3x2, "node_id": "000000000003"})
    assert view.lines(named) == ["neighbour n3 met on v1x2 (fe80::3)"]


def test_babblerd_not_running_while_watching_is_one_line_without_the_start_hint() -> None:
    said = WatchView().lines(Lost("babblerd is not running (no socket at /x); start it: ..."))
    assert said == ["babblerd is not running (no socket at /x); waiting for it to come back"]
    assert WatchView().lines(Lost("timed out")) == [
        "lost babblerd: timed out; waiting for it to come back"
    ]


def test_a_neighbour_met_unnamed_is_named_by_the_route_to_its_own_address() -> None:
    """watch's neighbour events never say the node (status does, by babeld's routes): the
    route to a node's own address with refmetric 0 through a neighbour says who it is."""
    view = WatchView()
    view.lines(snapshot())
    v3x2 = {"address": "fe80::3", "interface": "v1x2"}
    assert view.lines(Change("neighbour", "add", v3x2)) == ["neighbour met on v1x2 (fe80::3)"]
    route: dict[str, Any] = {"prefix": "fde0:20c6:1fa7:ffff:aaaa:bbbb:cccc:0/128"}
    route |= {"via": "fe80::3", "interface": "v1x2", "refmetric": 32}  # n3 beyond it
    assert view.lines(Change("route", "add", route)) == []
    said = view.lines(Change("route", "add", {**route, "refmetric": 0}))
    assert said == ["neighbour on v1x2 (fe80::3) is n3"]
    assert view.lines(Change("route", "change", {**route, "refmetric": 0})) == []  # once
    assert view.lines(Change("neighbour", "flush", v3x2)) == ["neighbour n3 lost on v1x2 (fe80::3)"]
