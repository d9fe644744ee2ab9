"""Other nodes' counters are fetched only while someone looks (daemon/nodes/viewer.py): no
ask while nobody asked `counters`, each routed node at most once a second while someone
did (timed when sent, across a pause in viewing), none VIEWER_HOLD after the last; a bad
answer changes nothing but is said once; nodes that came and went leave nothing behind. The
node-info port's side: one source's `counters` asks are bounded."""

from __future__ import annotations

import itertools
from collections import Counter
from ipaddress import IPv6Address
from typing import Any

import pytest
import structlog
import trio
import trio.testing

from babbler.core.addressing import format_node_id, node_address, owner_of
from babbler.daemon.fanout import Hub
from babbler.daemon.nodes import ask
from babbler.daemon.nodes import viewer as viewer_module
from babbler.daemon.nodes.answer import encode_counters
from babbler.daemon.nodes.service import NodeService
from babbler.daemon.nodes.viewer import EVERY, VIEWER_HOLD, Viewer
from babbler.daemon.wakeup import Signal

ONE, TWO, THREE = 0xA1, 0xA2, 0xA3


def answer(node: int, rx: int) -> dict[str, Any]:
    return {
        "node_id": format_node_id(node),
        "at": float(rx),
        "interfaces": [
            {"name": "v1x2", "rx_bytes": rx, "tx_bytes": 0, "rx_packets": 0, "tx_packets": 0}
        ],
    }


class FakeNodes:
    """The other nodes: each ask noted (node, trio time) when it reaches them; what each
    answers is settable, and how long the next asks take (`slow`, in turn; then 0.01 s)."""

    def __init__(self) -> None:
        self.asks: list[tuple[int, float]] = []
        self.bad: set[int] = set()
        self.broken: set[int] = set()
        self.slow: list[float] = []

    async def __call__(self, address: IPv6Address, port: int, node_id: str) -> dict[str, Any]:
        node = owner_of(address)
        assert (
            node is not None and format_node_id(node) == node_id and address == node_address(node)
        )
        self.asks.append((node, trio.current_time()))
        await trio.sleep(self.slow.pop(0) if self.slow else 0.01)
        if node in self.bad:
            raise ask.BadAnswer("bad counters: node_id: not the node asked")
        if node in self.broken:
            raise RuntimeError("a bug")
        return answer(node, len(self.asks))


async def test_nobody_looking_means_no_ask_and_a_viewer_asks_each_node_each_second(
    autojump_clock: trio.testing.MockClock,
) -> None:
    nodes, counts = FakeNodes(), Counter[str]()
    viewer = Viewer(lambda: [ONE, TWO], lambda: 6698, counts, nodes)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(viewer.run)
        await trio.sleep(60)
        assert nodes.asks == [] and viewer.entries() == []  # nobody looked: no traffic
        start = trio.current_time()
        for _ in range(10):  # a client asks each second for 10 s
            viewer.asked()
            await trio.sleep(1.0)
        await trio.sleep(VIEWER_HOLD + 2 * EVERY)
        stopped = trio.current_time()
        asked_by_then = len(nodes.asks)
        await trio.sleep(60)
        assert len(nodes.asks) == asked_by_then  # stopped: nothing more
        assert viewer.entries() == [] and viewer.readings == {}  # forgotten
        nursery.cancel_scope.cancel()
    for node in (ONE, TWO):
        times = [t for n, t in nodes.asks if n == node]
        assert times[0] - start < 0.1  # at once
        assert all(b - a >= EVERY - 1e-9 for a, b in itertools.pairwise(times))
        assert times[-1] <= start + 10 + VIEWER_HOLD  # none after the hold
        assert 10 <= len(times) <= 10 + VIEWER_HOLD + 1
    assert counts["counters_asks"] == len(nodes.asks)
    assert stopped - start < 10 + VIEWER_HOLD + 3


async def test_a_bad_answer_keeps_the_last_reading_and_is_said_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    nodes = FakeNodes()
    viewer = Viewer(lambda: [ONE, TWO], lambda: 6698, Counter(), nodes)
    with structlog.testing.capture_logs() as logs:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(viewer.run)
            viewer.asked()
            await trio.sleep(1.5)
            kept = viewer.readings[ONE]
            nodes.bad.add(ONE)
            nodes.broken.add(TWO)
            for _ in range(5):
                viewer.asked()
                await trio.sleep(1.0)
            assert viewer.readings[ONE] == kept  # the bad answers changed nothing
            entries = {e["node_id"]: e for e in viewer.entries()}
            assert entries[format_node_id(ONE)]["at"] == kept.at
            assert entries[format_node_id(ONE)]["age_s"] >= 5  # and it says how old
            nursery.cancel_scope.cancel()
    said = [entry["event"] for entry in logs]
    assert said.count("node counters not taken") == 1  # once, not each second
    assert said.count("taking node counters failed") == 1


async def test_a_node_no_longer_routed_is_neither_asked_nor_listed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    nodes, routed = FakeNodes(), [ONE, TWO]
    viewer = Viewer(lambda: list(routed), lambda: 6698, Counter(), nodes)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(viewer.run)
        viewer.asked()
        await trio.sleep(1.5)
        assert [e["node_id"] for e in viewer.entries()] == [
            format_node_id(ONE),
            format_node_id(TWO),
        ]
        routed.remove(TWO)
        viewer.asked()
        at = trio.current_time()
        await trio.sleep(2.0)
        assert [e["node_id"] for e in viewer.entries()] == [format_node_id(ONE)]
        assert all(t <= at for n, t in nodes.asks if n == TWO)
        nursery.cancel_scope.cancel()


async def test_nodes_that_come_and_go_leave_nothing_behind(
    autojump_clock: trio.testing.MockClock,
) -> None:
    nodes, routed = FakeNodes(), [ONE]
    viewer = Viewer(lambda: list(routed), lambda: 6698, Counter(), nodes)
    passing = [0xB00 + i for i in range(40)]  # a member announcing one new node id after another
    nodes.bad.update(passing[::2])  # half of them answering badly: said once each
    async with trio.open_nursery() as nursery:
        nursery.start_soon(viewer.run)
        for node in passing:
            routed.append(node)
            viewer.asked()  # someone keeps looking all along
            await trio.sleep(1.5)
            assert (node in viewer.readings) == (node not in nodes.bad)  # it was read
            routed.remove(node)
        viewer.asked()
        await trio.sleep(2.5)
        assert viewer.viewing and {n for n, _ in nodes.asks} == {ONE, *passing}
        assert set(viewer.readings) == {ONE}  # the readings of nodes gone are gone
        assert set(viewer._asked) == {ONE} and viewer._said == set()  # and all else of them
        nursery.cancel_scope.cancel()


async def test_a_node_asked_late_for_a_slot_is_not_asked_again_within_a_second(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(viewer_module, "ASKS", 1)  # one slot: the second node waits
    nodes = FakeNodes()
    nodes.slow = [0.9]  # the first ask, whichever node it goes to, holds the slot 0.9 s
    viewer = Viewer(lambda: [ONE, TWO], lambda: 6698, Counter(), nodes)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(viewer.run)
        for _ in range(6):
            viewer.asked()
            await trio.sleep(1.0)
        nursery.cancel_scope.cancel()
    assert sorted(t for _, t in nodes.asks[:2]) == pytest.approx([0.0, 0.9])  # one was sent late
    for node in (ONE, TWO):
        times = [t for n, t in nodes.asks if n == node]
        assert len(times) >= 4
        assert all(b - a >= EVERY - 1e-9 for a, b in itertools.pairwise(times)), times


async def test_a_node_whose_route_flaps_is_not_asked_again_within_a_second(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(viewer_module, "ASKS", 1)
    nodes, routed = FakeNodes(), [ONE, TWO, THREE]
    nodes.slow = [0.3, 0.3]  # the three are asked in turn, 0.3 s apart: rounds at .0, .3, .6
    viewer = Viewer(lambda: list(routed), lambda: 6698, Counter(), nodes)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(viewer.run)
        viewer.asked()
        await trio.sleep(2.1)
        flapping = nodes.asks[-1][0]  # asked at 2.0
        routed.remove(flapping)  # its route goes before the round at 2.3 ...
        viewer.asked()
        await trio.sleep(0.35)
        routed.append(flapping)  # ... and is back before the round at 2.6
        viewer.asked()
        await trio.sleep(2.0)
        nursery.cancel_scope.cancel()
    times = [t for n, t in nodes.asks if n == flapping]
    assert any(t > 2.5 for t in times)
    assert all(b - a >= EVERY - 1e-9 for a, b in itertools.pairwise(times)), times


async def test_a_viewer_coming_back_right_after_the_hold_does_not_ask_again_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    nodes = FakeNodes()
    viewer = Viewer(lambda: [ONE], lambda: 6698, Counter(), nodes)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(viewer.run)
        viewer.asked()
        await trio.sleep(2.5)
        viewer.asked()  # held until 5.5: asked at 0, 1, ..., 5
        await trio.sleep(VIEWER_HOLD + 0.1)
        assert not viewer.viewing and viewer.entries() == []
        back = trio.current_time()
        viewer.asked()  # 0.6 s after the last ask
        await trio.sleep(2.0)
        nursery.cancel_scope.cancel()
    times = [t for _, t in nodes.asks]
    assert any(t > back for t in times)
    assert all(b - a >= EVERY - 1e-9 for a, b in itertools.pairwise(times)), times


async def test_the_node_info_port_answers_counters_to_one_source_at_most_twice_a_second(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def ours() -> dict[str, Any]:
        return answer(ONE, 7)

    service = NodeService(
        me=lambda: ONE,
        port=6698,
        info=dict,
        routes=list,
        hub=Hub(),
        moved=Signal(),
        counters=ours,
    )
    source = node_address(TWO)
    replies = [await service._count(source) for _ in range(10)]  # a burst: 4 taken
    assert replies[:4] == [encode_counters(answer(ONE, 7))] * 4
    assert replies[4:] == [b"bad counters: asked too often\n"] * 6
    assert service.counts["counters_answers"] == 4
    await trio.sleep(1.0)  # two more a second
    assert [await service._count(source) for _ in range(3)][-1].startswith(b"bad counters")
    assert await service._count(node_address(THREE)) == encode_counters(answer(ONE, 7))
    silent = NodeService(
        me=lambda: ONE, port=6698, info=dict, routes=list, hub=Hub(), moved=Signal()
    )
    assert await silent._count(source) == b"bad request\n"  # no counters given: none answered


async def test_an_older_node_that_does_not_know_counters_is_said_as_such(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def refusing(address: IPv6Address, port: int, request: bytes, within: float) -> bytes:
        assert request == b"counters"
        return b"bad request\n"

    monkeypatch.setattr(ask, "_exchange", refusing)
    with pytest.raises(ask.AskFailed) as failed:
        await ask.ask_counters(node_address(ONE), 6698, format_node_id(ONE))
    assert not isinstance(failed.value, ask.BadAnswer)
    assert str(failed.value) == "the node answered 'bad request'"
