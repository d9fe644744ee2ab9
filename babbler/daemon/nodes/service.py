"""The node info service (DESIGN.md "Node info over the mesh"), one room of the daemon: it
serves this node's info on the node address, asks every routed node for its own (when its
route appears, then every minute; ASKS at a time), keeps the node book that `status.nodes`,
`babblerctl nodes`, `path` and `graph` are drawn from, and tells `watch` clients when a node
comes, goes or changes.

The daemon starts it with `nursery.start` while the mesh runs and feeds it triggers: routes
changed (`routes_changed`), watchers came or went (`watchers_changed`); its own answer and
the routes are read through the callables it is given.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Iterable
from ipaddress import IPv6Address
from typing import Any

import structlog
import trio

from babbler.core.addressing import format_node_id, node_address
from babbler.core.config import DEFAULT_INFO_PORT
from babbler.daemon.fanout import Hub
from babbler.daemon.nodes import ask, server
from babbler.daemon.nodes.book import NodeBook, events
from babbler.daemon.wakeup import Signal, rerun_on

log = structlog.get_logger("babbler.info")

# Other nodes asked for their info at once, at most.
ASKS = 8
# After a route change, this long before the node picture is recomputed (changes come in
# bursts; the picture is for people and programs, not for routing).
COALESCE = 0.2


class NodeService:
    def __init__(
        self,
        me: Callable[[], int],
        port: int,
        answer: Callable[[], bytes],
        routes: Callable[[], Iterable[dict[str, Any]]],
        hub: Hub,
        moved: Signal,
        answered: Callable[[int, dict[str, Any]], None] = lambda node, info: None,
        hold: Callable[[], float] = lambda: 1.0,
        asker: Callable[[IPv6Address, int], Awaitable[dict[str, Any]]] = ask.ask,
    ) -> None:
        self._me = me  # this node's id: `moved` notifies when it changes (a collision)
        self._moved = moved
        self.port = port  # where this node serves its info; 0: not here (others: the default)
        self._answer = answer
        self._routes = routes  # the usable and unusable routes, as `status.routes` shows them
        self._hub = hub
        self._answered = answered  # a node's info came (the IPv4 collision check reads it)
        self._hold = hold  # seconds without a route before a node is down (config.down_hold)
        self._ask_node = asker  # one exchange with a node (tests: a fake node elsewhere)
        self.book = NodeBook(me())
        self._changed = Signal()  # routes changed, an ask ended, nodes to ask again
        # The nodes `watch` clients were last told of; None while nobody watches.
        self._published: list[dict[str, Any]] | None = None
        self._said: set[tuple[int, str]] = set()  # (node, kind) of failed asks logged

    def view(self) -> list[dict[str, Any]]:
        """`status.nodes`."""
        return self.book.view(trio.current_time())

    def infos(self) -> list[tuple[int, dict[str, Any]]]:
        """Each node's last info answer, with its node id (host care sizes cables by them)."""
        return [(n.node_id, n.info) for n in self.book.nodes.values() if n.info is not None]

    def routes_changed(self) -> None:
        self._changed.notify()

    def ask_again(self, nodes: Iterable[int]) -> None:
        """Ask these nodes again soon (book.changed)."""
        for node in nodes:
            self.book.changed(node, trio.current_time())
        self._changed.notify()

    def watchers_changed(self) -> None:
        """A `watch` client came or the last one went: the first one's snapshot was made just
        now, so node events start from it."""
        if not self._hub.watching:
            self._published = None
        elif self._published is None:
            self._published = self.view()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve and ask until cancelled (the mesh stopped): then every node is unreachable."""
        self.book.stopped = False
        try:
            async with trio.open_nursery() as nursery:
                if self.port:
                    nursery.start_soon(rerun_on, self._moved, self._serve)
                task_status.started()
                await self._follow()
        finally:
            self.book.update_routes([], trio.current_time())
            self.book.stopped = True  # every node is down at once: no route is coming back
            self._publish()

    async def _serve(self) -> None:
        await server.serve(self.port, node_address(self._me()), self._answer)

    async def _follow(self) -> None:
        limiter = trio.CapacityLimiter(ASKS)
        async with trio.open_nursery() as asks:
            while True:
                changed = self._changed.event()  # before the reads: no change missed
                now = trio.current_time()
                self.book.me, self.book.hold = self._me(), self._hold()
                self.book.update_routes(list(self._routes()), now)
                for node in self.book.due(now):
                    self.book.asking(node, now)
                    asks.start_soon(self._ask, node, limiter)
                self._publish()
                wake = self.book.next_change()
                with trio.move_on_at(math.inf if wake is None else wake):
                    await changed.wait()
                await trio.sleep(COALESCE)  # route changes come in bursts

    async def _ask(self, node: int, limiter: trio.CapacityLimiter) -> None:
        """Ask one node and take its answer. Nothing a node answers, and nothing taking the
        answer raises, leaves this ask: it is the node's `error`, logged once per node and
        kind, and the service goes on."""
        async with limiter:
            try:
                info = await self._ask_node(node_address(node), self.port or DEFAULT_INFO_PORT)
                if info.get("node_id") != format_node_id(node):
                    raise ask.AskFailed("answered with another node id")
                self.book.answered(node, info, trio.current_time())
                self._answered(node, info)
            except ask.AskFailed as error:
                self.book.failed(node, str(error))
                if isinstance(error, ask.BadAnswer):  # not one that could not be reached
                    self._log_once(node, "refused", error)
            except Exception as error:  # a bug here must not end the daemon: said, kept
                self.book.failed(node, f"internal error ({type(error).__name__}): see the log")
                self._log_once(node, type(error).__name__, error)
            else:
                self._said = {(n, kind) for n, kind in self._said if n != node}
        self._changed.notify()

    def _log_once(self, node: int, kind: str, error: Exception) -> None:
        """Say a failed ask once for each node and kind, until the node answers well."""
        if (node, kind) in self._said:
            return
        self._said.add((node, kind))
        if isinstance(error, ask.AskFailed):
            log.warning("node info refused", node=format_node_id(node), error=str(error))
        else:
            log.error("taking node info failed", node=format_node_id(node), exc_info=error)

    def _publish(self) -> None:
        """Node events for `watch` clients. With none, nothing is made: the view of every
        node was ~12 % of babblerd's time on a churning 64-ring with nobody watching."""
        if not self._hub.watching or self._published is None:
            return
        current = self.view()
        for event in events(self._published, current):
            self._hub.publish_event(event)
        self._published = current
