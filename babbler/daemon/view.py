"""The daemon as clients and other nodes read it: the greeting, babeld's table, the counters,
`status`, the link counters (ours and, while a client looks, the other nodes') and this
node's info answer (requests.View, nodes/answer.py); and what subscribers
are told as it changes: babeld's lines to `monitor`, table and node-level events to `watch`.

It reads the daemon's parts (the mesh supervisor, identity, IPv4, the node book, the
kernel's health) and two facts the daemon's reconcile keeps (`Host`: the links as last read,
the links babblerd brought up); it changes none of them. Reads publish nothing; `settle` and
the `publish_*` calls do.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

import structlog
import trio

from babbler import __version__
from babbler.core import views
from babbler.core.addressing import format_node_id, node_address
from babbler.core.config import Config
from babbler.core.kernelhealth import KernelHealth
from babbler.core.links import Link, Selector, selected_links
from babbler.core.table import Applied
from babbler.daemon.babeld.launch import found
from babbler.daemon.counters import CountersReader
from babbler.daemon.early import Early
from babbler.daemon.fanout import Hub
from babbler.daemon.identity import Identity
from babbler.daemon.ipv4_service import Ipv4Service
from babbler.daemon.mesh import Fact, Mesh
from babbler.daemon.nodes import answer as nodeinfo
from babbler.daemon.nodes.viewer import Viewer

log = structlog.get_logger("babbler.daemon")


@dataclass(frozen=True)
class Host:
    """What the view reads of the host as the daemon's reconcile left it (a port: two reads)."""

    links: Callable[[], Mapping[str, Link]]  # as last read
    brought_up: Callable[[], Collection[str]]  # the links babblerd brought up, still up
    rdma: Callable[[], dict[str, Any] | None] = lambda: None  # macOS: daemon/rdma.py's read


# `stats`: node info exchanges since start (info asked of others, answers given, pushes
# made, pushes taken in), and link counters asked of others and given to them
NODE_COUNTS = (
    "info_asks",
    "info_answers",
    "info_pushes",
    "info_pushed",
    "counters_asks",
    "counters_answers",
)


class View:
    def __init__(
        self,
        config: Callable[[], Config],
        keyed: bool,
        mesh: Mesh,
        identity: Identity,
        hub: Hub,
        ipv4: Ipv4Service,
        nodes: Callable[[], list[dict[str, Any]]],  # status.nodes (nodes/service.py)
        kernel_health: KernelHealth,
        host: Host,
        early: Early | None,
        node_counts: Callable[[], Mapping[str, int]] = dict,
        link_counters: CountersReader | None = None,
        viewer: Viewer | None = None,
    ) -> None:
        self._config = config
        self._keyed = keyed
        self._mesh = mesh
        self._identity = identity
        self._hub = hub
        self._ipv4 = ipv4
        self._nodes = nodes
        self._kernel_health = kernel_health
        self._host = host
        self._early = early  # its router id is the header's until a session has one
        self._node_counts = node_counts  # node info exchanges (nodes/service.py), for `stats`
        self._watch_filter = views.WatchFilter()  # what of babeld's table `watch` is sent
        self._published: dict[str, Any] = {}
        self._babeld_found = False
        # this node's link counters, read per request (status, counters, other nodes' asks)
        self._link_counters = link_counters or CountersReader(config().platform)
        self._viewer = viewer  # other nodes' counters while a client looks (nodes/viewer.py)
        self.started = 0.0  # trio time the daemon began to serve (the info answer's uptime)
        self.find_babeld()

    # -- what clients read (requests.View) -----------------------------------------------------

    def header(self) -> list[str]:
        return [
            "BABEL 1.0",
            f"version babblerd-{__version__}",
            f"host {socket.gethostname()}",
            f"my-id {self.my_id}",
            "ok",
        ]

    @property
    def my_id(self) -> str:
        """The running (or starting) babeld's router id: an early-started one's until it
        is adopted or stopped; else the one the next babeld will use."""
        early = self._early
        if self._mesh.my_id is None and early is not None and early.popen.poll() is None:
            return early.launch.router_id
        return self._mesh.my_id or self._identity.next_router_id

    @property
    def selector(self) -> Selector:
        config = self._config()
        return Selector(config.interface, config.exclude)

    @property
    def name(self) -> str:
        return self._config().name or socket.gethostname()

    def settle(self) -> None:
        """Apply what babeld said that still waits (neighbour changes held while nobody
        watches) and publish it. Called before a request reads; never from inside a read."""
        self._mesh.catch_up()

    def dump_lines(self) -> list[str]:
        return self._mesh.table.dump_lines()

    def counters(self) -> dict[str, int]:
        counts = self._mesh.line_counts
        return {
            "babeld_lines_in": counts.lines_in,
            "babeld_repeats": counts.repeats,
            "babeld_held": counts.held,
            **{key: self._node_counts().get(key, 0) for key in NODE_COUNTS},
        }

    async def read_counters(self) -> None:
        """Read this node's link counters (those `status.interfaces` lists), for the
        request that follows: `status` and `counters` show this reading."""
        links = selected_links(self._host.links(), self.selector)
        await self._link_counters.read(link.name for link in links)

    async def counters_entry(self) -> dict[str, Any]:
        """This node's counters as another node's `counters` ask is answered."""
        await self.read_counters()
        reading = self._link_counters.latest
        return {
            "node_id": format_node_id(self._identity.node_id),
            "at": round(reading.at, 6) if reading else round(time.monotonic(), 6),
            "interfaces": reading.interfaces() if reading else [],
        }

    def counters_answer(self) -> dict[str, Any]:
        """The `counters` request (after `read_counters`): this node's reading, then the
        other nodes' that came while someone looked; the asker is a viewer from now on
        for nodes/viewer.VIEWER_HOLD."""
        now = time.monotonic()
        if self._viewer is not None:
            self._viewer.asked()
        reading = self._link_counters.latest
        own = {
            "node_id": format_node_id(self._identity.node_id),
            "at": round(reading.at, 6) if reading else round(now, 6),
            "age_s": round(max(0.0, now - reading.at), 3) if reading else 0.0,
            "interfaces": reading.interfaces() if reading else [],
        }
        others = self._viewer.entries() if self._viewer is not None else []
        return {"at": round(now, 6), "nodes": [own, *others]}

    def find_babeld(self) -> None:
        """Whether babeld is installed, looked up per babeld start and on reload (so one
        installed later is seen), never per `status`: a walk over PATH each time."""
        self._babeld_found = found(self._config().babeld)

    def babeld_view(self) -> dict[str, Any]:
        return {**self._mesh.babeld_view(), "my_id": self.my_id, "found": self._babeld_found}

    def facts(self, asker: object = None, with_nodes: bool = True) -> views.Facts:
        """What the views are made of. `with_nodes=False`: without `status.nodes`, which
        the node-level events and the node info do not show (each answer to another node
        made it anew: 63 a minute and more on a node of a 64-ring). A read: it publishes
        nothing (`settle` first for what babeld said last)."""
        node, config = self._identity.node, self._config()
        reading = self._link_counters.latest
        return views.Facts(
            version=__version__,
            node_id=node.value,
            node_id_source=node.source,
            node_id_persist_error=node.persist_error,
            mode=config.mode,
            mesh=self._mesh.state,
            babeld=self.babeld_view(),
            links=dict(self._host.links()),
            selector=self.selector,
            told=frozenset(self._mesh.told),
            table=self._mesh.table,
            clients=sum(1 for c in self._hub.clients if c is not asker),
            costs=config.cost,
            keyed=self._keyed,
            name=self.name,
            ipv4=self._ipv4.view(),
            nodes=tuple(self._nodes()) if with_nodes else (),
            brought_up=frozenset(self._host.brought_up()),
            mtu=config.mtu,
            kernel_problem=self._kernel_health.problem,
            platform=config.platform.key,
            rdma=self._host.rdma(),
            counters=dict(reading.links) if reading is not None else {},
            counters_at=round(reading.at, 6) if reading is not None else None,
        )

    def status(self, asker: object = None) -> dict[str, Any]:
        """The status object; `clients` counts the connections other than `asker`."""
        return views.status(self.facts(asker))

    def info_value(self) -> dict[str, Any]:
        """This node's info, as other nodes read it (nodes/answer.py; the node service adds
        its version and encodes it)."""
        self.settle()
        return nodeinfo.answer(
            self.facts(with_nodes=False),
            self.name,
            self._config().info,
            trio.current_time() - self.started,
            node_address(self._identity.node_id),
        )

    # -- what subscribers are told -------------------------------------------------------------

    def publish_fact(self, fact: Fact) -> None:
        """A fact of the supervisor's to its subscribers: babeld's line to `monitor`, the
        table event to `watch`; a session that began or ended as node-level events (and
        `monitor` clients of another router id ended, as babeld ends its own)."""
        hub = self._hub
        if not isinstance(fact, Applied):
            self.publish_node()
            if hub.monitoring and (ended := hub.end_monitors(self.my_id)):
                # A babeld started or ended (its `flush` lines went first): a `monitor`
                # whose header names another router id reconnects, as with babeld's own.
                log.info("monitor clients ended: babeld's router id changed", clients=ended)
            return
        if hub.monitoring:
            hub.publish_lines([fact.line])
        if hub.watching:
            event = self._watch_filter.event(fact)
            if event is not None:
                hub.publish_event(event)

    def publish_node(self) -> None:
        """Send `watch` clients the node-level facts that changed."""
        current = views.node_view(self.facts(with_nodes=False))
        for event in views.node_events(self._published, current):
            self._hub.publish_event(event)
        self._published = current

    def subscribers_changed(self) -> None:
        """Table events for `watch` only while someone watches; babeld's stream read while
        anyone subscribes (else dumps: core/readpolicy.py)."""
        hub = self._hub
        if not hub.watching:
            self._watch_filter.stop()
        elif not self._watch_filter.started:
            self._watch_filter.start(self._mesh.table)
        self._mesh.set_watched(hub.monitoring + hub.watching > 0)
