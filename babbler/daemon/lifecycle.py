"""The daemon: builds the rooms and wires them, then `run`s them. Each concern is a module
of its own that reads what it needs through a narrow port (a dataclass of reads) instead of
calling back into `Daemon`:

- reconcile.py: every trigger's one `refresh` (links, addresses, then host care);
- hostcare.py: the fence, the kernel settings, links brought up, MTUs (one apply, one undo);
- demand.py: who wants the mesh, linger, the one loop that runs it, lonely links;
- view.py: what clients and other nodes read, and what subscribers are told;
- mesh.py (the babeld supervisor), identity.py, ipv4_service.py, nodes/, responder.py;
- launcher.py: babeld's launches and the early one's adoption, for the supervisor;

What stays here is what joins two rooms: a babeld fact to the view and the collision watch,
a node's answer to IPv4 and MTU, a collision's re-roll, reload, and the order of start and
stop.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import structlog
import trio

from babbler.core import views
from babbler.core.addressing import node_address
from babbler.core.config import Config, down_hold, reloaded
from babbler.core.errors import ConfigError
from babbler.core.kernelhealth import RETRY_CAP, RETRY_FIRST, KernelHealth
from babbler.core.links import (
    Link,
    Selector,
    usable_names,
)
from babbler.core.meshkey import MeshKey
from babbler.core.table import Applied
from babbler.daemon.demand import Demand, run_mesh, say_lonely_links
from babbler.daemon.early import Early
from babbler.daemon.fanout import Hub, Limits
from babbler.daemon.hostcare import HostCare, MeshFacts
from babbler.daemon.identity import Identity
from babbler.daemon.ipv4 import Ipv4
from babbler.daemon.ipv4_service import Ipv4Service
from babbler.daemon.launcher import Launcher, Reads
from babbler.daemon.links.kernel import KERNEL_DEADLINE, Guarded, Kernel
from babbler.daemon.log import configure as configure_logging
from babbler.daemon.mesh import Fact, Mesh, MeshHost, MeshTunables
from babbler.daemon.nodeid import NodeId
from babbler.daemon.nodes.service import NodeService
from babbler.daemon.reconcile import MeshReads, Reconcile
from babbler.daemon.responder import run_responder
from babbler.daemon.responder import wanted as bench_wanted
from babbler.daemon.server import PublicSocket
from babbler.daemon.view import Host, View
from babbler.daemon.wakeup import Signal, rerun_on

log = structlog.get_logger("babbler.daemon")


@dataclass(frozen=True)
class Tunables:
    """The numbers the daemon runs by that are not settings (each explained where it is
    defined): the mesh supervisor's and the public socket's. Tests pass their own."""

    mesh: MeshTunables = field(default_factory=MeshTunables)
    clients: Limits = field(default_factory=Limits)
    kernel_deadline: float = KERNEL_DEADLINE  # one kernel call (links/kernel.py)
    kernel_retry: tuple[float, float] = (RETRY_FIRST, RETRY_CAP)  # core/kernelhealth.py


class Daemon:
    def __init__(
        self,
        config: Config,
        kernel: Kernel,
        node: NodeId,
        reload_config: Callable[[], Config] | None = None,
        key: MeshKey | None = None,
        early: Early | None = None,
        tunables: Tunables | None = None,
    ) -> None:
        tunables = tunables or Tunables()
        kernel = Guarded(kernel, tunables.kernel_deadline)  # no call hangs, none is trusted
        self.config = config
        self.key = key
        self.kernel = kernel
        self.identity = Identity(node, config.state_dir, config.hello_interval)
        self._reload_config = reload_config or (lambda: self.config)
        self.hub = Hub(self._subscribers_changed, tunables.clients)
        self.demand = Demand(lambda: self.config, lambda: self.hub.subscribers)
        self.ipv4 = Ipv4Service(
            Ipv4.load(config.ipv4_prefix, config.state_dir, node.value),
            kernel,
            restart=self._ipv4_changed,
        )
        self.cables_changed = Signal()  # babeld's links or neighbours came or went
        self.kernel_health = KernelHealth(*tunables.kernel_retry)
        self._collision_check = trio.Event()
        self.node_moved = Signal()  # the node id changed: serve on the new node address
        self.nodes = NodeService(
            me=lambda: self.node_id,
            port=config.info_port,
            answer=lambda: self.view.info_answer(),
            routes=lambda: views.entries(self.mesh.table, "route"),
            hub=self.hub,
            moved=self.node_moved,
            answered=self._node_answered,
            hold=lambda: down_hold(self.config),
        )
        self.host = HostCare(
            kernel,
            config.state_dir,
            MeshFacts(
                config=lambda: self.config,
                keyed=key is not None,
                node_id=lambda: self.node_id,
                ipv4=self.ipv4,
                table=lambda: self.mesh.table,
                infos=lambda: [
                    (n.node_id, n.info)
                    for n in self.nodes.book.nodes.values()
                    if n.info is not None
                ],
                ask_again=self.nodes.ask_again,
            ),
        )
        self.reconcile = Reconcile(
            kernel,
            self.ipv4,
            self.host,
            self.kernel_health,
            MeshReads(
                config=lambda: self.config,
                node_id=lambda: self.node_id,
                table=lambda: self.mesh.table,
                publish=lambda: self.view.publish_node(),
            ),
        )
        launcher = Launcher(
            Reads(
                config=lambda: self.config,
                key=key,
                ipv4=self.ipv4,
                identity=self.identity,
                links=lambda: self.links,
                usable=self.usable_names,
                starting=lambda: self.view.find_babeld(),
            ),
            early,
        )
        self.mesh = Mesh(
            MeshHost(
                launch=launcher.launch,
                interface_options=launcher.interface_options,
                usable_names=self.usable_names,
                links_changed=self.reconcile.links_changed,
                kernel=kernel,
                report=self._on_fact,
                adopt=launcher.adopt,
                hello_interval=lambda: self.config.hello_interval,
            ),
            tunables.mesh,
        )
        self.mesh.set_watched(False)
        self.view = View(
            lambda: self.config,
            key is not None,
            self.mesh,
            self.identity,
            self.hub,
            self.ipv4,
            self.nodes.view,
            self.kernel_health,
            Host(links=lambda: self.links, brought_up=lambda: self.host.brought_up),
            early,
        )

    @property
    def links(self) -> dict[str, Link]:
        """The links as the last reconcile read them."""
        return self.reconcile.links

    async def refresh(self) -> None:
        """Every trigger's one way in (reconcile.py)."""
        await self.reconcile.refresh()

    # -- who this node is; `status` (the view's: view.py) --------------------------------------

    @property
    def node(self) -> NodeId:
        return self.identity.node

    @property
    def node_id(self) -> int:
        return self.identity.node_id

    @property
    def selector(self) -> Selector:
        return Selector(self.config.interface, self.config.exclude)

    def usable_names(self) -> set[str]:
        return usable_names(self.links, self.selector)

    def status(self, asker: object = None) -> dict[str, Any]:
        return self.view.status(asker)

    # -- what joins rooms: facts in, events out, node answers, collisions, cables ------------------

    def _on_fact(self, fact: Fact) -> None:
        self.view.publish_fact(fact)
        if not isinstance(fact, Applied):
            return
        if fact.entry.kind in ("neighbour", "interface") and fact.verb != "change":
            self.cables_changed.notify()  # a cable's ends may have come or gone
        if fact.entry.kind == "route":
            self.identity.observe(fact, self.mesh.my_id, trio.current_time())
            self._collision_check.set()  # a candidate's hold may start or end
            self.nodes.routes_changed()

    def _subscribers_changed(self) -> None:
        self.view.subscribers_changed()
        self.nodes.watchers_changed()
        self.demand.changed.notify()

    async def _bench_responder(self) -> None:
        """The bench responder on the node addresses (moved when either changes)."""
        address = str(node_address(self.node_id))
        ipv4 = self.ipv4.state
        address_v4 = None if ipv4.node_address is None else str(ipv4.node_address)
        prefix = None if ipv4.prefix is None else str(ipv4.prefix)
        tied = self.config.platform.children_die_with_babblerd
        await run_responder(address, self.config.bench_port, address_v4, prefix, tied)

    def _ipv4_changed(self, reason: str) -> None:
        """IPv4 turned on or off, or its node address moved: babeld's filters are fixed at
        start, and the services on the node addresses follow."""
        self.mesh.restart_babeld(reason)
        self.node_moved.notify()

    async def _follow_collisions(self) -> None:
        """Another node uses our node id: take a new one, re-address, restart babeld.
        Sleeps until a candidate announcement has been held long enough (or the table
        changes), so a lasting announcement counts although babeld does not repeat it."""
        while True:
            deadline = self.identity.collision_deadline(self.mesh.my_id)
            with trio.move_on_at(math.inf if deadline is None else deadline):
                await self._collision_check.wait()
            self._collision_check = trio.Event()
            if not self.identity.collision_due(self.mesh.my_id, trio.current_time()):
                continue
            self.identity.reroll()
            self.ipv4.state.renumbered(self.node_id)
            self.node_moved.notify()  # serve on the new node address
            self.reconcile.book.forget_all()
            self.mesh.restart_babeld("node id changed")
            await self.refresh()
            self.view.publish_node()

    def _node_answered(self, node: int, info: dict[str, Any]) -> None:
        """Another node's info came: it may hold our IPv4 node address (a collision), or
        the size it offers on a cable to this node."""
        if self.ipv4.collision(node, info, self.node_id):
            self.cables_changed.notify()  # re-address now
        elif self.reconcile.active and self.host.mtu_targets(self.links):
            self.cables_changed.notify()  # resize now

    async def _follow_cables(self) -> None:
        """babeld's links and neighbours make the cable addresses: reconcile when they
        change, when a cable held after its neighbour left is due to go, and after an IPv4
        node address moved."""
        while True:
            changed = self.cables_changed.event()
            with trio.move_on_at(self.ipv4.next_expiry()):
                await changed.wait()
            await self.refresh()

    # -- lifecycle -----------------------------------------------------------------------------

    async def _set_active(self, active: bool) -> None:
        self.reconcile.active = active
        log.info(
            "mesh " + ("demanded" if active else "released"),
            mode=self.config.mode,
            subscribers=self.hub.subscribers,
        )
        await self.refresh()

    async def _run_with_mesh(self, nursery: trio.Nursery) -> None:
        """What runs while the mesh does (demand.run_mesh cancels it when released)."""
        nursery.start_soon(self.mesh.run_while_active)
        await nursery.start(self.nodes.run)
        if bench_wanted(self.config):
            nursery.start_soon(rerun_on, self.node_moved, self._bench_responder)
        nursery.start_soon(say_lonely_links, self._used_links, self._links_met)

    def _used_links(self) -> set[str]:
        return {n for n in self.mesh.told if (link := self.links.get(n)) and link.up}

    def _links_met(self) -> set[str]:
        return {e.field("if") or "" for e in self.mesh.table.entries("neighbour")} - {""}

    async def reload(self) -> None:
        """SIGHUP: re-read the config file. A bad file is logged and changes nothing."""
        try:
            fresh = self._reload_config()
        except ConfigError as error:
            log.error("reload refused, configuration unchanged", error=str(error))
            return
        self.config, fixed = reloaded(self.config, fresh)
        if fixed:
            log.warning("these settings change only at restart", settings=fixed)
        configure_logging(self.config.log_format, self.config.log_level)
        self.view.find_babeld()
        log.info("configuration reloaded", config=str(self.config.config))
        self.demand.changed.notify()
        await self.refresh()
        self.reconcile.links_changed.notify()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve until cancelled; on the way out babeld is stopped and our addresses removed."""
        public = PublicSocket(self.config.socket_path)  # first: a bad path touches nothing
        self.view.started = trio.current_time()
        # A babblerd of this boot crashed.
        restored = await self.host.restore_leftovers()
        if restored:
            log.warning("kernel settings left by a crashed babblerd restored", settings=restored)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self.reconcile.retry)
                await self.refresh()
                nursery.start_soon(self.reconcile.follow_kernel)
                nursery.start_soon(self._follow_cables)
                nursery.start_soon(self.ipv4.follow_clashes, self.refresh)
                nursery.start_soon(run_mesh, self.demand, self._set_active, self._run_with_mesh)
                nursery.start_soon(self._follow_collisions)
                await nursery.start(public.serve, self.hub, self.view)
                task_status.started()
        finally:
            public.close()
            with trio.CancelScope(shield=True), trio.move_on_after(2.0):
                self.reconcile.active = False
                await self.refresh()
                await self.host.undo(self.links)
                log.info("stopped", addresses_left=len(views.addresses(self.view.facts())))
