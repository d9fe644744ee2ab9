"""Other nodes' link counters, fetched only while someone looks (docs/protocol.md
`counters`): a client's `counters` request makes this node a viewer for VIEWER_HOLD
seconds; meanwhile every routed node is asked for its counters on its node-info port, ASKS
at a time, and no node twice within EVERY seconds (timed when an ask is sent, not when it
is queued, and kept across a pause in viewing). When nobody has asked for VIEWER_HOLD, it
stops and forgets the readings: no traffic to any other node while nobody looks, and node
info itself is untouched by it. What it keeps of a node (its reading, its failure said)
goes once the node has no route and no ask under way, and the time of its last ask goes
EVERY after that ask: nodes that came and went leave nothing, however many.

An answer is checked as strictly as node info (checked.parse_counters): anything else is
`bad counters: ...`, logged once for that node until it answers well, and dropped; the
node's last good reading stays. Nothing an answer holds changes anything but that node's
stored reading.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from ipaddress import IPv6Address
from typing import Any

import structlog
import trio

from babbler.core.addressing import format_node_id, node_address
from babbler.daemon.nodes import ask
from babbler.daemon.wakeup import Signal

log = structlog.get_logger("babbler.info")

# How long one `counters` request keeps this node asking the others: `babblerctl top`, the
# page and metrics ask each second, so one late request does not stop and restart the asks.
VIEWER_HOLD = 3.0
# Each other node is asked at most this often (the views redraw each second). Seconds.
EVERY = 1.0
# Nodes asked at once, at most: a 64-node mesh is asked in a few rounds of small exchanges.
ASKS = 8

Asker = Callable[[IPv6Address, int, str], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class Stored:
    """A node's last good reading: its own clock's `at`, its links, and when (trio time,
    here) it arrived."""

    at: float
    interfaces: list[dict[str, Any]]
    arrived: float


class Viewer:
    def __init__(
        self,
        routed: Callable[[], Iterable[int]],
        port: Callable[[], int],
        counts: Counter[str],
        asker: Asker = ask.ask_counters,
    ) -> None:
        self._routed = routed  # the node ids with a usable route now (the node book's)
        self._port = port  # their node-info port
        self._counts = counts  # `stats`: counters_asks
        self._ask_node = asker  # one exchange (tests: a fake node)
        self.readings: dict[int, Stored] = {}
        self._until = -math.inf  # trio time until which someone is looking
        self._asked: dict[int, float] = {}  # when each node was last sent an ask (trio time)
        self._in_flight: set[int] = set()
        self._came = Signal()  # a viewer came while nobody looked
        self._said: set[int] = set()  # nodes whose failure is logged, until they answer

    @property
    def viewing(self) -> bool:
        return trio.current_time() < self._until

    def asked(self) -> None:
        """A client asked `counters`: keep asking the others for VIEWER_HOLD from now."""
        was = self.viewing
        self._until = trio.current_time() + VIEWER_HOLD
        if not was:
            self._came.notify()

    def entries(self) -> list[dict[str, Any]]:
        """The `counters` request's entries for the other nodes: each routed node whose
        counters came while someone looked, by node id."""
        now, routed = trio.current_time(), set(self._routed())
        return [
            {
                "node_id": format_node_id(node),
                "at": stored.at,
                "age_s": round(now - stored.arrived, 3),
                "interfaces": stored.interfaces,
            }
            for node, stored in sorted(self.readings.items())
            if node in routed
        ]

    async def run(self) -> None:
        """Until cancelled: ask while someone looks, wait while nobody does."""
        limiter = trio.CapacityLimiter(ASKS)
        try:
            async with trio.open_nursery() as asks:
                while True:
                    came = self._came.event()
                    if not self.viewing:
                        self._forget()
                        await came.wait()
                        continue
                    now, routed = trio.current_time(), set(self._routed())
                    self._keep_only(routed, now)
                    for node in routed - self._in_flight:
                        if now >= self._asked.get(node, -math.inf) + EVERY:
                            self._in_flight.add(node)
                            asks.start_soon(self._ask, node, limiter)
                    due = [self._asked[n] + EVERY for n in routed - self._in_flight]
                    await trio.sleep_until(min([*due, now + EVERY, self._until]))
        finally:
            self._forget()

    def _forget(self) -> None:
        """Nobody looks: the readings go. When each node was last asked stays, so a viewer
        coming back at once does not ask a node again within EVERY."""
        self.readings.clear()

    def _keep_only(self, routed: set[int], now: float) -> None:
        """Drop what is kept of each node that has no route and no ask under way, so that
        nodes coming and going leave nothing; the time of its last ask stays until EVERY after
        it, lest a route that comes back at once let it be asked again within EVERY."""
        keep = routed | self._in_flight
        self.readings = {node: got for node, got in self.readings.items() if node in keep}
        self._asked = {n: at for n, at in self._asked.items() if n in keep or now < at + EVERY}
        self._said &= keep

    async def _ask(self, node: int, limiter: trio.CapacityLimiter) -> None:
        """Ask one node; a good answer replaces its reading, anything else is said once."""
        try:
            async with limiter:
                if not self.viewing:
                    return
                # Timed here, when sent: an ask that waited for a slot must not let the next
                # one of this node follow it within EVERY.
                self._asked[node] = trio.current_time()
                self._counts["counters_asks"] += 1
                found = await self._ask_node(node_address(node), self._port(), format_node_id(node))
                if self.viewing:
                    interfaces = found["interfaces"]
                    self.readings[node] = Stored(found["at"], interfaces, trio.current_time())
                self._said.discard(node)
        except ask.AskFailed as error:
            self._log_once(node, error)
        except Exception as error:  # a bug here must not end the daemon: said, kept
            self._log_once(node, error)
        finally:
            self._in_flight.discard(node)

    def _log_once(self, node: int, error: Exception) -> None:
        if node in self._said:
            return
        self._said.add(node)
        if isinstance(error, ask.AskFailed):
            log.warning("node counters not taken", node=format_node_id(node), error=str(error))
        else:
            log.error("taking node counters failed", node=format_node_id(node), exc_info=error)
