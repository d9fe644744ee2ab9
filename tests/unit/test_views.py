"""The status object and watch events, from facts, without trio or sockets."""

from __future__ import annotations

from dataclasses import replace

from babbler.core import views
from babbler.core.babeld_lines import TableLine, parse_line
from babbler.core.links import Selector
from babbler.core.table import MeshTable
from tests.unit.recorded import RECORDED, table_of
from tests.unit.samples import MINE, facts


def test_status_has_every_contract_key_and_only_our_addresses() -> None:
    status = views.status(facts())
    assert status["node_id"] == "1a2b3c4d5e6f"
    assert status["range"] == "fde0:20c6:1fa7:ffff:1a2b:3c4d:5e6f:0/112"
    assert status["addresses"] == [{"interface": "v1x2", "address": str(MINE)}]
    assert status["interfaces"] == [
        {
            "name": "v1x2",
            "kind": "other",
            "up": True,
            "babel": True,
            "speed_mbps": 10000,
            "cost": 32,
            "brought_up": False,
            "mtu": None,
            "max_mtu": None,
            "counters": None,  # not read: the daemon reads them per request
        }
    ]
    assert status["counters_at"] is None
    assert status["node_address"] == "fde0:20c6:1fa7:ffff:1a2b:3c4d:5e6f:0"
    assert status["keyed"] is False and status["unmatched_globs"] == []
    assert [r["prefix"] for r in status["routes"]] == ["fde0:20c6:1fa7:ffff:2::1/128"]
    assert status["neighbours"][0]["rtt"] == 0.12  # the later `change` line won
    assert status["clients"] == 2 and status["mode"] == "always" and status["mesh"] == "running"
    for key in ("version", "babeld", "xroutes", "node_id_source", "node_id_persist_error"):
        assert key in status


def test_node_events_name_only_what_changed() -> None:
    before = views.node_view(facts())
    assert views.node_events(before, before) == []
    after = views.node_view(facts(mesh="restarting", told=frozenset()))
    events = views.node_events(before, after)
    assert [e["type"] for e in events] == ["mesh", "interfaces"]
    assert events[0] == {"type": "mesh", "mesh": "restarting"}
    assert events[1]["interfaces"][0]["babel"] is False
    assert [e["type"] for e in views.node_events({}, before)] == list(before)


def test_entry_events_only_for_real_changes() -> None:
    table = MeshTable()
    add = parse_line(RECORDED[4])
    assert isinstance(add, TableLine)
    first = table.apply(add)
    assert first is not None
    event = views.entry_event(first)
    assert event is not None
    assert event["type"] == "route" and event["action"] == "add"
    assert event["route"]["metric"] == 96 and event["route"]["installed"] is True
    repeat = table.apply(replace(add, verb="change"))
    assert repeat is not None and views.entry_event(repeat) is None  # babeld's repeat
    gone = table.apply(replace(add, verb="flush"))
    assert gone is not None
    assert views.entry_event(gone) == {**event, "action": "flush"}


def test_retracted_routes_are_not_listed_as_live() -> None:
    retracted = RECORDED[4].replace("metric 96", "metric 65535")
    status = views.status(facts(table=table_of(retracted)))
    assert status["routes"] == []
    assert len(facts(table=table_of(retracted)).table.entries("route")) == 1  # dump keeps it


def test_costs_follow_overrides_and_unmatched_patterns_are_named() -> None:
    status = views.status(
        facts(costs=(("v1*", 200),), selector=Selector(interface=("v*", "tb*")), keyed=True)
    )
    assert status["interfaces"][0]["cost"] == 200
    assert status["unmatched_globs"] == ["tb*"]
    assert status["keyed"] is True


def test_watch_leaves_out_small_rtt_moves_and_follows_routes_as_status_does() -> None:
    table, watch = MeshTable(), views.WatchFilter()
    neighbour = (
        "add neighbour 9 address fe80::2 if v1x2 reach ffff ureach 0000 rxcost 96 txcost 96 "
        "rtt 0.200 rttcost 0 cost 96"
    )
    route = RECORDED[4]

    def change(line: str) -> str:
        return "change" + line.removeprefix("add")

    def fed(line: str) -> dict[str, object] | None:
        parsed = parse_line(line)
        assert isinstance(parsed, TableLine)
        applied = table.apply(parsed)
        assert applied is not None
        return watch.event(applied)

    assert fed(neighbour) is None  # nobody watches yet
    watch.start(table)  # a first watch client: its snapshot holds the neighbour
    assert fed(change(neighbour).replace("0.200", "0.260")) is None
    assert fed(change(neighbour).replace("0.200", "0.900")) is None  # < 1 ms
    moved = fed(change(neighbour).replace("0.200", "1.300"))  # 1.1 ms on
    assert moved is not None and moved["action"] == "change"
    cost = fed(change(neighbour).replace("rtt 0.200", "rtt 1.300").replace(" cost 96", " cost 9"))
    assert cost is not None  # anything but the RTT is always sent
    assert (event := fed(route)) is not None and event["action"] == "add"
    gone = fed(change(route).replace("metric 96", "metric 65535"))
    assert gone is not None and gone["action"] == "flush"  # retracted: gone, as in status
    assert fed(change(route).replace("metric 96", "metric 65535")) is None
    back = fed(change(route))
    assert back is not None and back["action"] == "add"
    watch.stop()
    assert fed("flush" + route[3:]) is None
