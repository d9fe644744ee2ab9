"""The client library's pure parts: typed results from babblerd's JSON, the end of an
answer, node events kept across reconnects, and the reconnect back-off."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from babbler.client import (
    Backoff,
    Change,
    NodeEvent,
    NodeTracker,
    ProtocolError,
    Refused,
    Snapshot,
    TooSlow,
    parse_event,
    parse_status,
)
from babbler.client.answer import ends, streamed
from tests.unit.samples import NODE_ENTRY, STATUS, typed


def test_a_status_is_typed_and_keeps_its_json() -> None:
    status = typed({"nodes": [{**NODE_ENTRY, "links": [{"name": "v2x1"}]}]})
    assert status.node_id == "1a2b3c4d5e6f" and status.mesh == "running"
    assert status.babeld.my_id == "02:9a:00:00:00:00:00:01" and status.babeld.found
    assert status.interfaces[0].speed_mbps == 10000 and status.interfaces[0].cost == 32
    (node,) = status.nodes
    assert node.label == "n2" and node.hops == 1 and node.links[0].name == "v2x1"
    assert status.raw["xroutes"] == []  # what is not modelled is still there
    assert parse_status(json.dumps(status.raw)) == status


def test_keys_babblerd_adds_later_are_kept_not_refused() -> None:
    status = parse_status({**STATUS, "future_key": 1})
    assert status.raw["future_key"] == 1


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[1, 2]", "not a JSON object"),
        ("{", "not JSON"),
        (json.dumps({**STATUS, "babeld": {}}), "status of an unexpected shape"),
        (json.dumps({k: v for k, v in STATUS.items() if k != "nodes"}), "KeyError: 'nodes'"),
        (json.dumps({**STATUS, "nodes": [1]}), "status of an unexpected shape"),
    ],
)
def test_json_of_the_wrong_shape_is_a_protocol_error(text: str, says: str) -> None:
    with pytest.raises(ProtocolError, match=says):
        parse_status(text)


def test_watch_lines_become_events() -> None:
    snapshot = parse_event(json.dumps({"type": "snapshot", "status": STATUS}))
    assert isinstance(snapshot, Snapshot) and snapshot.status.name == "n1"
    node = parse_event(json.dumps({"type": "node", "action": "up", "node": NODE_ENTRY}))
    assert isinstance(node, NodeEvent) and node.action == "up" and node.node.name == "n2"
    mesh = parse_event('{"type": "mesh", "mesh": "restarting"}')
    assert mesh == Change("mesh", None, "restarting")
    route = parse_event('{"type": "route", "action": "flush", "route": {"prefix": "x"}}')
    assert route == Change("route", "flush", {"prefix": "x"})
    assert parse_event('{"type": "invented"}') == Change("invented", None, None)
    for bad in ['{"action": "up"}', '{"type": "node", "action": "sideways", "node": {}}']:
        with pytest.raises(ProtocolError):
            parse_event(bad)


def test_the_end_of_an_answer() -> None:
    assert ends("ok") and not ends("add route x") and not ends("{}")
    with pytest.raises(TooSlow):
        ends("no too slow")
    with pytest.raises(Refused, match="no too many clients") as refused:
        ends("no too many clients")
    assert refused.value.reason == "too many clients" and not isinstance(refused.value, TooSlow)
    with pytest.raises(ProtocolError, match="bad unknown request"):
        ends("bad unknown request")
    assert streamed("ok") == "ok" and streamed("add route x") == "add route x"
    with pytest.raises(TooSlow):
        streamed("no too slow")


def node(node_id: str, reachable: bool = True, **changes: Any) -> dict[str, Any]:
    return {**NODE_ENTRY, "node_id": node_id, "reachable": reachable, **changes}


def snapshot(*nodes: dict[str, Any]) -> Snapshot:
    return Snapshot(typed({"nodes": list(nodes)}))


def told(events: list[NodeEvent]) -> list[tuple[str, str, bool]]:
    return [(e.action, e.node.node_id, e.node.reachable) for e in events]


def test_the_tracker_reports_each_node_once_across_reconnects() -> None:
    tracker = NodeTracker()
    first = snapshot(node("aaaaaaaaaaaa"), node("bbbbbbbbbbbb", False))
    assert told(tracker.feed(first)) == [
        ("up", "aaaaaaaaaaaa", True),
        ("down", "bbbbbbbbbbbb", False),
    ]
    live = NodeEvent("up", typed({"nodes": [node("cccccccccccc")]}).nodes[0])
    assert tracker.feed(live) == [live]
    assert tracker.feed(Change("mesh", None, "running")) == []
    # Reconnected: a stays as it was (nothing), b came back, c went, d is new; ages and
    # errors alone are no change.
    again = snapshot(
        node("aaaaaaaaaaaa", info_age_s=50.0, error="timed out"),
        node("bbbbbbbbbbbb"),
        node("dddddddddddd", metric=64),
    )
    assert told(tracker.feed(again)) == [
        ("up", "bbbbbbbbbbbb", True),
        ("up", "dddddddddddd", True),
        ("down", "cccccccccccc", False),
    ]
    renamed = snapshot(node("aaaaaaaaaaaa", name="renamed"), node("bbbbbbbbbbbb"))
    assert told(tracker.feed(renamed))[0] == ("changed", "aaaaaaaaaaaa", True)


@given(st.lists(st.sets(st.sampled_from("abcdef"), max_size=6), min_size=1, max_size=8))
def test_after_any_snapshots_the_tracker_knows_what_the_last_one_said(
    seen: list[set[str]],
) -> None:
    """Whatever came before, following the events leaves the set of reachable nodes the
    program believes in equal to the last snapshot's."""
    tracker = NodeTracker()
    believed: set[str] = set()
    for ids in seen:
        for event in tracker.feed(snapshot(*(node(i * 12) for i in sorted(ids)))):
            if event.action == "up":
                believed.add(event.node.node_id)
            elif event.action == "down":
                believed.discard(event.node.node_id)
        assert believed == {i * 12 for i in ids}


def test_backoff_doubles_to_its_cap_with_jitter_and_resets() -> None:
    backoff = Backoff(first=0.1, cap=1.0, jitter=0.2)
    delays = [backoff.delay() for _ in range(7)]
    for delay, base in zip(delays, [0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0], strict=True):
        assert base * 0.8 <= delay <= base * 1.2
    backoff.reset()
    assert 0.08 <= backoff.delay() <= 0.12
