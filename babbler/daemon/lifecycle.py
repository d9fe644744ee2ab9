"""The daemon: builds the rooms and wires them, then `run`s them. Each concern is a module
of its own (reconcile, hostcare, demand, view, moves, mesh, launcher, identity, ipv4_service,
nodes/, responder: docs/design.md "The daemon in rooms") that reads what it needs through a
narrow port (a dataclass of reads) instead of calling back into `Daemon`.

What stays here is the wiring: each port filled in, a babeld fact and a subscriber's coming
or going handed to the rooms that follow them, reload, and the order of start and stop.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import structlog
import trio

from babbler.core import views
from babbler.core.config import Config, down_hold, reloaded
from babbler.core.errors import ConfigError
from babbler.core.kernelhealth import RETRY_CAP, RETRY_FIRST, KernelHealth
from babbler.core.meshkey import MeshKey
from babbler.core.platform import MACOS
from babbler.core.table import Applied
from babbler.daemon import responder
from babbler.daemon.demand import Cables, Demand, run_mesh, say_lonely_links
from babbler.daemon.early import Early
from babbler.daemon.fanout import Hub, Limits
from babbler.daemon.hostcare import HostCare, MeshFacts
from babbler.daemon.identity import Identity
from babbler.daemon.ipv4 import Ipv4
from babbler.daemon.ipv4_service import Ipv4Service, moves_cables
from babbler.daemon.launcher import Launcher, Reads
from babbler.daemon.links.kernel import KERNEL_DEADLINE, Guarded, Kernel
from babbler.daemon.log import configure as configure_logging
from babbler.daemon.mesh import Fact, Mesh, MeshHost, MeshTunables
from babbler.daemon.moves import Followers, Moves
from babbler.daemon.nodeid import NodeId
from babbler.daemon.nodes.service import NodeService
from babbler.daemon.rdma import Readiness
from babbler.daemon.rdma import Reads as RdmaReads
from babbler.daemon.reconcile import MeshReads, Reconcile
from babbler.daemon.server import PublicSocket
from babbler.daemon.view import Host, View
from babbler.daemon.wakeup import Signal

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
        self._reload_config = reload_config or (lambda: self.config)
        identity = Identity(node, config.state_dir, config.hello_interval)
        self.hub = Hub(self._subscribers_changed, tunables.clients)
        self.demand = Demand(lambda: self.config, lambda: self.hub.subscribers)
        self.moves = Moves(
            identity,
            Followers(
                my_id=lambda: self.mesh.my_id,
                renumber=lambda node_id: self.ipv4.state.renumbered(node_id),
                forget_addresses=lambda: self.reconcile.book.forget_all(),
                restart_babeld=lambda reason: self.mesh.restart_babeld(reason),
                refresh=lambda: self.reconcile.refresh(),
                publish=lambda: self.view.publish_node(),
            ),
        )
        state = Ipv4.load(config.ipv4_prefix, config.state_dir, node.value)
        gated = not config.platform.babeld_v4_via_v6  # macOS: a new cable's /31 first
        detours = config.platform.cable_detours  # a pulled cable's connections go round
        self.ipv4 = Ipv4Service(state, kernel, self.moves.ipv4_changed, gated, detours)
        kernel_health = KernelHealth(*tunables.kernel_retry)
        links_changed = Signal()  # the reconcile's: our node info may have changed too
        self.nodes = NodeService(
            me=lambda: identity.node_id,
            port=config.info_port,
            info=lambda: self.view.info_value(),
            routes=lambda: views.entries(self.mesh.table, "route"),
            hub=self.hub,
            moved=self.moves.moved,
            answered=lambda node, info: self.reconcile.node_answered(node, info),
            hold=lambda: down_hold(self.config),
            links_changed=links_changed,
            counters=lambda: self.view.counters_entry(),
        )
        self.host = HostCare(
            kernel,
            config.state_dir,
            MeshFacts(
                config=lambda: self.config,
                keyed=key is not None,
                node_id=lambda: identity.node_id,
                ipv4=self.ipv4,
                table=lambda: self.mesh.table,
                infos=self.nodes.infos,
                ask_again=self.nodes.ask_again,
            ),
        )
        self.reconcile = Reconcile(
            kernel,
            self.ipv4,
            self.host,
            kernel_health,
            MeshReads(
                config=lambda: self.config,
                node_id=lambda: identity.node_id,
                table=lambda: self.mesh.table,
                publish=lambda: self.view.publish_node(),
            ),
            links_changed,
        )
        launcher = Launcher(
            Reads(
                config=lambda: self.config,
                key=key,
                ipv4=self.ipv4,
                identity=identity,
                links=lambda: self.reconcile.links,
                usable=self.reconcile.usable_names,
                starting=lambda: self.view.find_babeld(),
            ),
            early,
        )
        self.mesh = Mesh(
            MeshHost(
                launch=launcher.launch,
                interface_options=launcher.interface_options,
                usable_names=self.reconcile.usable_names,
                links_changed=self.reconcile.links_changed,
                kernel=kernel,
                report=self._on_fact,
                adopt=launcher.adopt,
                hello_interval=lambda: self.config.hello_interval,
            ),
            tunables.mesh,
        )
        self.mesh.set_watched(False)
        self.rdma = Readiness(
            RdmaReads(
                macos=config.platform is MACOS,
                links=lambda: self.reconcile.links,
                links_changed=self.reconcile.links_changed,
            )
        )
        self.view = View(
            lambda: self.config,
            key is not None,
            self.mesh,
            identity,
            self.hub,
            self.ipv4,
            self.nodes.view,
            kernel_health,
            Host(
                links=lambda: self.reconcile.links,
                brought_up=lambda: self.host.brought_up,
                rdma=lambda: self.rdma.value,
            ),
            early,
            node_counts=lambda: self.nodes.counts,
            viewer=self.nodes.viewer,
        )
        self.responder = responder.Place(
            config=lambda: self.config,
            node_id=lambda: identity.node_id,
            ipv4=lambda: self.ipv4.state,
            moved=self.moves.moved,
        )
        self.cables = Cables(
            told=lambda: self.mesh.told,
            links=lambda: self.reconcile.links,
            table=lambda: self.mesh.table,
        )

    def status(self, asker: object = None) -> dict[str, Any]:
        return self.view.status(asker)

    # -- what joins rooms: a babeld fact, a subscriber ----------------------------------------

    def _on_fact(self, fact: Fact) -> None:
        self.view.publish_fact(fact)
        if not isinstance(fact, Applied):
            return
        if moves_cables(fact):
            self.reconcile.cables_changed.notify()  # a cable's ends may have come or gone
        if fact.entry.kind == "route":
            self.moves.observe(fact)  # the collision watch
            self.nodes.routes_changed(fact.entry.field("prefix"))

    def _subscribers_changed(self) -> None:
        self.view.subscribers_changed()
        self.nodes.watchers_changed()
        self.demand.changed.notify()

    # -- lifecycle -----------------------------------------------------------------------------

    async def _run_with_mesh(self, nursery: trio.Nursery) -> None:
        """What runs while the mesh does (demand.run_mesh cancels it when released)."""
        nursery.start_soon(self.mesh.run_while_active)
        nursery.start_soon(self.mesh.follow_routes)
        await nursery.start(self.nodes.run)
        nursery.start_soon(responder.while_mesh_runs, self.responder)
        nursery.start_soon(say_lonely_links, self.cables)

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
        await self.reconcile.refresh()
        self.reconcile.links_changed.notify()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve until cancelled; on the way out babeld is stopped and our addresses removed."""
        public = PublicSocket(self.config.socket_path)  # first: a bad path touches nothing
        self.view.started = trio.current_time()
        # A babblerd of this boot crashed.
        restored = await self.host.restore_leftovers()
        if restored:
            log.warning("kernel settings left by a crashed babblerd restored", settings=restored)
        await responder.end_stale(self.config.private_dir)  # a killed babblerd's (macOS)
        reconcile = self.reconcile
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(reconcile.retry)
                # Wanted from the start (`always`): the first pass adds the addresses (and
                # keeps those the early start added) instead of removing them as idle.
                reconcile.active = self.demand.wanted()
                await reconcile.refresh()
                nursery.start_soon(reconcile.follow_kernel)
                nursery.start_soon(reconcile.follow_cables)
                nursery.start_soon(reconcile.follow_probes)
                nursery.start_soon(self.ipv4.follow_clashes, reconcile.refresh)
                nursery.start_soon(run_mesh, self.demand, reconcile.set_active, self._run_with_mesh)
                nursery.start_soon(self.moves.follow_collisions)
                nursery.start_soon(self.rdma.follow)
                await nursery.start(public.serve, self.hub, self.view)
                task_status.started()
        finally:
            public.close()
            with trio.CancelScope(shield=True), trio.move_on_after(2.0):
                reconcile.active = False
                await reconcile.refresh()
                await self.host.undo(reconcile.links)
                log.info("stopped", addresses_left=len(views.addresses(self.view.facts())))
