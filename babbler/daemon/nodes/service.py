"""The node info service (DESIGN.md "Node info over the mesh"), one room of the daemon: it
serves this node's info on the node address, asks every routed node for its own when its
route appears (ASKS at a time), pushes its own to every routed node each time it changes
and takes theirs (nodes/own.py; docs/design.md "Node info: pushed on change"), keeps the
node book that `status.nodes`, `babblerctl nodes`, `path` and `graph` are drawn from, and
tells `watch` clients when a node comes, goes or changes.

The daemon starts it with `nursery.start` while the mesh runs and feeds it triggers: routes
changed (`routes_changed`), watchers came or went (`watchers_changed`); its own answer and
the routes are read through the callables it is given.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from ipaddress import IPv6Address
from typing import Any

import structlog
import trio

from babbler.core.addressing import format_node_id, node_address, owner_of
from babbler.core.config import DEFAULT_INFO_PORT
from babbler.daemon.fanout import Hub
from babbler.daemon.nodes import ask, server
from babbler.daemon.nodes.answer import (
    COUNTERS_BURST,
    COUNTERS_RATE,
    RateLimit,
    encode,
    encode_counters,
)
from babbler.daemon.nodes.book import NodeBook, concerns, events
from babbler.daemon.nodes.checked import BadInfo, parse
from babbler.daemon.nodes.own import OwnInfo
from babbler.daemon.nodes.viewer import Asker, Viewer
from babbler.daemon.wakeup import Signal, rerun_on, wait_any

log = structlog.get_logger("babbler.info")

# Other nodes asked for their info at once, at most.
ASKS = 8
# After a route change, this long before the node picture is recomputed (changes come in
# bursts; the picture is for people and programs, not for routing).
COALESCE = 0.2
# And at most one pass this often while changes keep coming. Each pass reads every route
# (N of them per node), builds this node's info and looks for asks and pushes: on a 64-ring
# churning on 2 cores, routes changed every pass and those reads at 5 a second were a fifth
# of babblerd's time (docs/benchmarks.md "The first minute"). The first change after a
# quiet GAP is still read COALESCE after it. At 1 s a pulled cable's news reached the
# graph of a 5-ring's other nodes up to 2.4 s after babeld's route moved (bench/
# after_pull.py; 0.7 s without a gap): half of that keeps both. Seconds.
GAP = 0.5
# How often this node looks at its own info for a change that neither a route nor the
# reconcile's `links_changed` (cable addresses, MTUs, a reload) announces: RDMA readiness,
# which changes with a reboot. Every 2 s was a quarter of a quiet node's CPU (one build of
# the info reads every route: docs/benchmarks.md). Seconds.
LOOK = 10.0
Pusher = Callable[[IPv6Address, int, bytes, IPv6Address], Awaitable[None]]


class NodeService:
    def __init__(
        self,
        me: Callable[[], int],
        port: int,
        info: Callable[[], dict[str, Any]],
        routes: Callable[[], Iterable[dict[str, Any]]],
        hub: Hub,
        moved: Signal,
        answered: Callable[[int, dict[str, Any]], None] = lambda node, info: None,
        hold: Callable[[], float] = lambda: 1.0,
        asker: Callable[[IPv6Address, int], Awaitable[dict[str, Any]]] = ask.ask,
        pusher: Pusher = ask.push,
        links_changed: Signal | None = None,
        counters: Callable[[], Awaitable[dict[str, Any]]] | None = None,
        counters_asker: Asker = ask.ask_counters,
    ) -> None:
        self._me = me  # this node's id: `moved` notifies when it changes (a collision)
        self._moved = moved
        self.port = port  # where this node serves its info; 0: not here (others: the default)
        self._info = info  # this node's info, without its version (view.info_value)
        self._routes = routes  # the usable and unusable routes, as `status.routes` shows them
        self._hub = hub
        self._answered = answered  # a node's info came (the IPv4 collision check reads it)
        self._hold = hold  # seconds without a route before a node is down (config.down_hold)
        self._ask_node = asker  # one exchange with a node (tests: a fake node elsewhere)
        self._push_node = pusher
        self.own = OwnInfo()  # this node's own info's version, and who holds which
        self.counts: Counter[str] = Counter()  # `stats`: info_asks, info_answers, ...
        self.book = NodeBook(me())
        self._changed = Signal()  # routes changed, an ask ended, nodes to ask again
        self._links_changed = links_changed or Signal()  # our info may have changed
        # The routes changed since the book last read them: the other wakes (an ask ended, a
        # push due, LOOK) leave them unread, each read a view of every route (O(N)).
        self._routes_stale = True
        # The nodes `watch` clients were last told of; None while nobody watches.
        self._published: list[dict[str, Any]] | None = None
        self._said: set[tuple[int, str]] = set()  # (node, kind) of failed asks logged
        # This node's link counters ({node_id, at, interfaces}: view.counters_entry) for
        # other nodes' `counters` asks, each source within its own bucket.
        self._counters = counters
        self._counters_limit = RateLimit(rate=COUNTERS_RATE, burst=COUNTERS_BURST)
        # Other nodes' counters, asked only while a client looks (nodes/viewer.py).
        self.viewer = Viewer(
            self.routed, lambda: self.port or DEFAULT_INFO_PORT, self.counts, counters_asker
        )

    def view(self) -> list[dict[str, Any]]:
        """`status.nodes`."""
        return self.book.view(trio.current_time())

    def infos(self) -> list[tuple[int, dict[str, Any]]]:
        """Each node's last info answer, with its node id (host care sizes cables by them)."""
        return [(n.node_id, n.info) for n in self.book.nodes.values() if n.info is not None]

    def routed(self) -> list[int]:
        """The nodes with a usable route now (the ones a viewer asks for counters)."""
        return [n.node_id for n in self.book.nodes.values() if n.route is not None]

    def routes_changed(self, prefix: str | None = None) -> None:
        """A route changed (`prefix`: its prefix, if one). One outside every node's range
        (IPv4, the host's) is none the book reads: half of a mesh's routes, ignored."""
        if prefix is not None and not concerns(prefix):
            return
        self._routes_stale = True
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
                nursery.start_soon(self.viewer.run)
                task_status.started()
                await self._follow()
        finally:
            self.book.update_routes([], trio.current_time())
            self.book.stopped = True  # every node is down at once: no route is coming back
            self._publish()

    async def _serve(self) -> None:
        await server.serve(
            self.port, node_address(self._me()), self._answer, self._take, self._count
        )

    async def _count(self, source: IPv6Address) -> bytes:
        """Our link counters for the node asking from `source`, at most COUNTERS_RATE a
        second from one source."""
        if self._counters is None:
            return b"bad request\n"
        if not self._counters_limit.allow(source, trio.current_time()):
            return b"bad counters: asked too often\n"
        self.counts["counters_answers"] += 1
        return encode_counters(await self._counters())

    def _own_info(self) -> dict[str, Any]:
        """This node's info with its version; a change since the last look wakes the
        pushes."""
        serial = self.own.serial
        value = self.own.stamp(self._info(), trio.current_time())
        if self.own.serial != serial:
            self._changed.notify()
        return value

    def _answer(self, source: IPv6Address) -> bytes:
        """Our info for the node asking from `source`, which then holds this version."""
        value = self._own_info()
        asker = owner_of(source)
        if asker is not None:
            self.own.held(asker, value["serial"])
        self.counts["info_answers"] += 1
        return encode(value)

    def _take(self, source: IPv6Address, data: bytes) -> bytes:
        """A push from `source`: taken only as the info of the node whose range `source` is
        in, checked as an answer is; the reply line."""
        self.counts["info_pushed"] += 1
        pusher = owner_of(source)
        try:
            info = parse(data)
        except BadInfo as error:
            if pusher is not None:
                self.book.failed(pusher, f"bad node info: {error}")
                self._log_once(pusher, "refused", ask.BadAnswer(f"bad node info: {error}"))
            return f"bad node info: {error}\n".encode()
        if pusher is None or info["node_id"] != format_node_id(pusher):
            return b"bad push: not from the node's own addresses\n"
        if self.book.pushed(pusher, info, trio.current_time()):
            self._answered(pusher, info)
            self._changed.notify()
        return b"ok\n"

    async def _follow(self) -> None:
        limiter = trio.CapacityLimiter(ASKS)
        last = -math.inf  # when the last pass began
        async with trio.open_nursery() as asks:
            while True:
                # before the reads: no change missed
                changed, relinked = self._changed.event(), self._links_changed.event()
                now = last = trio.current_time()
                me = self._me()
                if self._routes_stale or me != self.book.me:
                    self._routes_stale = False
                    self.book.me = me
                    self.book.update_routes(list(self._routes()), now)
                self.book.hold = self._hold()
                self.book.expire(now)
                for node in self.book.due(now):
                    self.book.asking(node, now)
                    asks.start_soon(self._ask, node, limiter)
                push_at = None
                wakes = [self.book.next_change()]
                if self.port:  # served: we have a node address to push from
                    push_at, look_at = self._pushes(asks, limiter, now)
                    wakes += [push_at, look_at]
                self._publish()
                wake = min((w for w in wakes if w is not None), default=None)
                with trio.move_on_at(math.inf if wake is None else wake):
                    await wait_any([changed, relinked])
                if push_at is not None and trio.current_time() >= push_at:
                    continue  # our change, SETTLE old: pushed now, not a GAP later
                # route changes come in bursts: gathered, and one pass a GAP at most
                await trio.sleep_until(max(trio.current_time() + COALESCE, last + GAP))

    def _pushes(
        self, asks: trio.Nursery, limiter: trio.CapacityLimiter, now: float
    ) -> tuple[float | None, float]:
        """Push our info to every routed node that does not hold this version; when the
        next push falls due, and when to look at our info again."""
        self._own_info()
        routed = self.book.pushers()  # an older babblerd asks by itself, refuses `push`
        self.own.forget(set(self.book.nodes))
        for node in self.own.due(routed, now):
            self.own.in_flight.add(node)
            asks.start_soon(self._push, node, limiter)
        return self.own.next_due(routed), now + LOOK

    async def _push(self, node: int, limiter: trio.CapacityLimiter) -> None:
        """Give one node our info; a failure is tried again later (own.RETRY)."""
        async with limiter:
            value = self._own_info()
            try:
                await self._push_node(
                    node_address(node), self.port, encode(value), node_address(self._me())
                )
                self.own.held(node, value["serial"])
                self.counts["info_pushes"] += 1
            except ask.AskFailed as error:
                self.own.failed(node, trio.current_time())
                log.debug("push failed", node=format_node_id(node), error=str(error))
            except Exception as error:  # a bug here must not end the daemon: said, kept
                self.own.failed(node, trio.current_time())
                self._log_once(node, type(error).__name__, error)
            finally:
                self.own.in_flight.discard(node)
        self._changed.notify()

    async def _ask(self, node: int, limiter: trio.CapacityLimiter) -> None:
        """Ask one node and take its answer. Nothing a node answers, and nothing taking the
        answer raises, leaves this ask: it is the node's `error`, logged once per node and
        kind, and the service goes on."""
        async with limiter:
            try:
                self.counts["info_asks"] += 1
                info = await self._ask_node(node_address(node), self.port or DEFAULT_INFO_PORT)
                if info.get("node_id") != format_node_id(node):
                    raise ask.AskFailed("answered with another node id")
                if self.book.answered(node, info, trio.current_time()):
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
