"""The node info service wakes on what it is told (daemon/nodes/service.py, a
`wakeup.Signal`): a route that appears is asked within the coalescing pause, each time,
although nothing else would wake the service."""

from __future__ import annotations

from collections.abc import Callable
from ipaddress import IPv6Address
from typing import Any

import trio
import trio.testing

from babbler.core.addressing import format_node_id, node_address
from babbler.daemon.fanout import Hub
from babbler.daemon.nodes.own import SETTLE
from babbler.daemon.nodes.service import COALESCE, GAP, LOOK, NodeService
from babbler.daemon.wakeup import Signal
from tests.unit.test_nodes import route

ONE, TWO = 0xA1, 0xA2


async def test_a_route_that_appears_is_asked_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    routes: list[dict[str, Any]] = []
    asked: dict[IPv6Address, float] = {}
    came = Signal()

    async def asker(address: IPv6Address, _port: int) -> dict[str, Any]:
        asked[address] = trio.current_time()
        came.notify()
        node = next(n for n in (ONE, TWO) if node_address(n) == address)
        return {"node_id": format_node_id(node)}

    service = NodeService(
        me=lambda: 1,
        port=0,
        info=dict,
        routes=lambda: routes,
        hub=Hub(),
        moved=Signal(),
        asker=asker,
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        await trio.sleep(20)  # no route, nothing due: the service sleeps
        for node in (ONE, TWO):
            routes.append(route(node))
            told = trio.current_time()
            service.routes_changed()
            with trio.fail_after(10):
                while node_address(node) not in asked:
                    await came.event().wait()
            assert asked[node_address(node)] - told <= 2 * COALESCE
            await trio.sleep(20)  # answered, nothing due: asleep again
        nursery.cancel_scope.cancel()


def pushing_service(
    mine: dict[str, Any],
    routes: Callable[[], list[dict[str, Any]]],
    pushed: list[float],
    links_changed: Signal,
) -> NodeService:
    """A served node ONE whose info is `mine`, with TWO routed: TWO answers with a version,
    and each push of ours to it is noted in `pushed` (its time)."""

    async def asker(address: IPv6Address, _port: int) -> dict[str, Any]:
        return {"node_id": format_node_id(TWO), "run": "ab" * 8, "serial": 1}

    async def pusher(address: IPv6Address, _port: int, data: bytes, _me: IPv6Address) -> None:
        pushed.append(trio.current_time())

    return NodeService(
        me=lambda: ONE,
        port=6698,
        info=lambda: dict(mine),
        routes=routes,
        hub=Hub(),
        moved=Signal(),
        asker=asker,
        pusher=pusher,
        links_changed=links_changed,
    )


async def test_a_links_change_is_pushed_without_waiting_for_the_look(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """What no route shows (a cable's address, an MTU) changes this node's info; the
    reconcile's `links_changed` wakes the service, which pushes it after SETTLE, not at the
    next LOOK (a look every 2 s was a quarter of a quiet node's CPU)."""
    mine = {"name": "one", "mtu": 1500}
    pushed: list[float] = []
    links_changed = Signal()
    service = pushing_service(mine, lambda: [route(TWO)], pushed, links_changed)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(service._follow)
        await trio.sleep(LOOK * 3)  # TWO asked us nothing: pushed our info once, after GRACE
        assert len(pushed) == 1
        mine["mtu"] = 9000
        changed = trio.current_time()
        links_changed.notify()
        await trio.sleep(SETTLE + 2 * GAP + COALESCE)  # a pass a GAP at most
        assert len(pushed) == 2 and pushed[1] - changed < LOOK / 2, (pushed, changed)
        await trio.sleep(LOOK * 3)
        assert len(pushed) == 2  # nothing changed since
        nursery.cancel_scope.cancel()


async def test_routes_that_keep_changing_are_read_a_gap_apart_and_a_push_is_not_delayed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A churning mesh: routes change every 0.1 s. The service reads them at most once a
    GAP (each read is every route), and a change of its own info is still pushed SETTLE
    after the pass that saw it, not a GAP later (a pulled cable's news waited up to 2 s)."""
    mine = {"name": "one", "mtu": 1500}
    pushed: list[float] = []
    reads: list[float] = []
    links_changed = Signal()

    def routes() -> list[dict[str, Any]]:
        reads.append(trio.current_time())
        return [route(TWO)]

    service = pushing_service(mine, routes, pushed, links_changed)

    async def churn() -> None:
        while True:
            service.routes_changed()
            await trio.sleep(0.1)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(service._follow)
        nursery.start_soon(churn)
        await trio.sleep(LOOK)  # TWO asked us nothing: pushed our info once, after GRACE
        assert len(pushed) == 1
        reads.clear()
        await trio.sleep(10 * GAP)
        assert 9 <= len(reads) <= 11, reads  # not 50: one read a GAP
        mine["mtu"] = 9000
        changed = trio.current_time()
        links_changed.notify()
        with trio.fail_after(3 * GAP):
            while len(pushed) < 2:
                await trio.sleep(0.01)
        assert pushed[1] - changed <= GAP + SETTLE + COALESCE, (pushed, changed)
        nursery.cancel_scope.cancel()
