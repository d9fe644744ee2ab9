"""The node info service wakes on what it is told (daemon/nodes/service.py, a
`wakeup.Signal`): a route that appears is asked within the coalescing pause, each time,
although nothing else would wake the service."""

from __future__ import annotations

from ipaddress import IPv6Address
from typing import Any

import trio
import trio.testing

from babbler.core.addressing import format_node_id, node_address
from babbler.daemon.fanout import Hub
from babbler.daemon.nodes.service import COALESCE, NodeService
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
