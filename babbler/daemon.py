"""The daemon: wires the kernel, the address plan, demand, the mesh supervisor and the server.

Reconcile, don't react: any trigger (a netlink event, a client subscribing, a reload) leads to
one `refresh`: re-read the links, plan the addresses, apply the plan, tell whoever follows
link changes. `refresh` is idempotent, so events the daemon causes itself are harmless.
"""

from __future__ import annotations

import socket
from dataclasses import replace
from typing import Any

import structlog
import trio

from babbler import __version__
from babbler import config as configuration
from babbler.addressing import format_node_id, node_range, random_node_id
from babbler.addrplan import IndexBook, plan, wanted_addresses
from babbler.config import Config
from babbler.errors import ConfigError, KernelError
from babbler.links.kernel import Kernel
from babbler.links.model import Link, Selector, diff, selected_links, usable_names
from babbler.log import configure as configure_logging
from babbler.mesh import Mesh, MeshHost
from babbler.nodeid import NodeId, write_node_id
from babbler.server import Hub, serve
from babbler.state import VIEWS
from babbler.sync import Signal

log = structlog.get_logger("babbler.daemon")

# The header babeld's clients expect before a router id is known.
UNKNOWN_ID = "00:00:00:00:00:00:00:00"


class Daemon:
    def __init__(self, config: Config, flags: dict[str, Any], kernel: Kernel, node: NodeId) -> None:
        self.config = config
        self.flags = flags
        self.kernel = kernel
        self.node = node
        self.snapshot: dict[str, Link] = {}
        self.book = IndexBook()
        self.active = False
        self.links_changed = Signal()
        self.demand_changed = Signal()
        self.active_changed = Signal()
        self.hub = Hub(self.demand_changed.notify)
        self.mesh = Mesh(
            MeshHost(
                config=lambda: self.config,
                node_range=lambda: str(node_range(self.node_id)),
                usable_names=self.usable_names,
                links_changed=self.links_changed,
                kernel=kernel,
                hub=self.hub,
                on_change=self._publish_node,
                on_collision=self._on_collision,
            )
        )
        self._refresh_lock = trio.Lock()
        self._mesh_scope: trio.CancelScope | None = None
        self._published: dict[str, Any] = {}
        self._collision = trio.Event()

    # -- what clients read (server.View) -------------------------------------------------------

    @property
    def node_id(self) -> int:
        return self.node.value

    @property
    def selector(self) -> Selector:
        return Selector(self.config.interface, self.config.exclude)

    def usable_names(self) -> set[str]:
        return usable_names(self.snapshot, self.selector)

    def header(self) -> list[str]:
        return [
            "BABEL 1.0",
            f"version babblerd-{__version__}",
            f"host {socket.gethostname()}",
            f"my-id {self.mesh.my_id or UNKNOWN_ID}",
            "ok",
        ]

    def dump_lines(self) -> list[str]:
        return self.mesh.table.dump_lines()

    def addresses_view(self) -> list[dict[str, str]]:
        own = node_range(self.node_id)
        return [
            {"interface": link.name, "address": str(address)}
            for link in sorted(self.snapshot.values(), key=lambda ln: ln.name)
            for address in sorted(link.addresses)
            if address in own
        ]

    def interfaces_view(self) -> list[dict[str, Any]]:
        return [
            {
                "name": link.name,
                "kind": link.category,
                "up": link.up,
                "babel": link.name in self.mesh.told,
            }
            for link in selected_links(self.snapshot, self.selector)
        ]

    def status(self) -> dict[str, Any]:
        table = self.mesh.table
        return {
            "version": __version__,
            "node_id": format_node_id(self.node_id),
            "range": str(node_range(self.node_id)),
            "mode": self.config.mode,
            "mesh": self.mesh.state,
            "babeld": self.mesh.babeld_view(),
            "addresses": self.addresses_view(),
            "interfaces": self.interfaces_view(),
            "neighbours": [VIEWS["neighbour"](e) for e in table.entries("neighbour")],
            "routes": [VIEWS["route"](e) for e in table.entries("route")],
            "xroutes": [VIEWS["xroute"](e) for e in table.entries("xroute")],
            "clients": len(self.hub.clients),
            "node_id_source": self.node.source,
            "node_id_persist_error": self.node.persist_error,
        }

    def _publish_node(self) -> None:
        """Send `watch` clients the node-level facts that changed."""
        current = {
            "node_id": format_node_id(self.node_id),
            "addresses": self.addresses_view(),
            "interfaces": self.interfaces_view(),
            "babeld": self.mesh.babeld_view(),
        }
        for key, value in current.items():
            if self._published.get(key) != value:
                self._published[key] = value
                self.hub.publish_event({"type": key, key: value})

    # -- reconcile -----------------------------------------------------------------------------

    async def refresh(self) -> None:
        """Re-read the links, bring the addresses to the plan, tell followers."""
        async with self._refresh_lock:
            new = await self.kernel.snapshot()
            change = diff(self.snapshot, new)
            self.snapshot = new
            if change:
                # Address-only changes are mostly our own doing: keep them out of info logs.
                quiet = all(fields == ("addresses",) for _, fields in change.changed)
                notable = change.added or change.removed or not quiet
                (log.info if notable else log.debug)("links changed", reasons=change.reasons())
            wanted = wanted_addresses(new, self.selector, self.node_id, self.book, self.active)
            todo = plan(new, self.selector, self.node_id, wanted)
            for item in todo.remove:
                try:
                    await self.kernel.remove_address(item)
                    log.info("address removed", interface=item.interface, address=str(item.address))
                except KernelError as error:
                    log.warning(
                        "cannot remove address",
                        interface=item.interface,
                        address=str(item.address),
                        error=str(error),
                    )
            for item in todo.add:
                try:
                    await self.kernel.add_address(item)
                    log.info("address added", interface=item.interface, address=str(item.address))
                except KernelError as error:
                    log.warning(
                        "cannot add address",
                        interface=item.interface,
                        address=str(item.address),
                        error=str(error),
                    )
            if todo:
                self.snapshot = await self.kernel.snapshot()
            if change or todo:
                self.links_changed.notify()
                self._publish_node()

    def _on_collision(self, other_router: str) -> None:
        self._collision.set()

    async def _follow_collisions(self) -> None:
        while True:
            await self._collision.wait()
            self._collision = trio.Event()
            await self._reroll()

    async def _reroll(self) -> None:
        """Another node uses our node id: take a new one, persist it, re-address, and give
        babeld the new range."""
        old, new = self.node_id, random_node_id()
        error = write_node_id(self.config.state_dir, new)
        self.node = NodeId(new, "rerolled", error)
        self.book.forget_all()
        log.error(
            "node id changed after a collision",
            old=format_node_id(old),
            new=format_node_id(new),
            persisted=error is None,
            persist_error=error,
        )
        self.mesh.restart_babeld("node id changed")
        await self.refresh()
        self._publish_node()

    async def _follow_kernel(self) -> None:
        while True:
            await self.kernel.wait_for_change()
            try:
                await self.refresh()
            except KernelError as error:
                # A dump failing (rare: the kernel under memory pressure) must not stop the
                # daemon; the next event re-reads everything.
                log.error("cannot read links", error=str(error))

    # -- demand and lifecycle ------------------------------------------------------------------

    def _wanted(self) -> bool:
        return self.config.mode == "always" or self.hub.subscribers > 0

    async def _set_active(self, active: bool) -> None:
        if active == self.active:
            return
        self.active = active
        log.info(
            "mesh " + ("demanded" if active else "released"),
            mode=self.config.mode,
            subscribers=self.hub.subscribers,
        )
        if not active and self._mesh_scope is not None:
            self._mesh_scope.cancel()
        self.active_changed.notify()
        await self.refresh()

    async def _follow_demand(self) -> None:
        """On-demand: active while someone subscribes, and `linger` seconds after."""
        while True:
            event = self.demand_changed.event()
            if self._wanted():
                await self._set_active(True)
            elif self.active:
                with trio.move_on_after(self.config.linger) as linger:
                    while not self._wanted():
                        await self.demand_changed.event().wait()
                if linger.cancelled_caught:
                    await self._set_active(False)
                continue
            await event.wait()

    async def _supervise_mesh(self) -> None:
        while True:
            event = self.active_changed.event()
            if self.active:
                with trio.CancelScope() as scope:
                    self._mesh_scope = scope
                    await self.mesh.run_while_active()
                self._mesh_scope = None
            else:
                await event.wait()

    async def reload(self) -> None:
        """SIGHUP: re-read the config file. A bad file is logged and changes nothing."""
        try:
            fresh = configuration.reload(self.config, self.flags)
        except ConfigError as error:
            log.error("reload refused, configuration unchanged", error=str(error))
            return
        fixed = [
            k
            for k in configuration.KEYS.values()
            if k not in configuration.RELOADABLE and getattr(fresh, k) != getattr(self.config, k)
        ]
        if fixed:
            log.warning("these settings change only at restart", settings=fixed)
        updates = {k: getattr(fresh, k) for k in configuration.RELOADABLE}
        self.config = replace(self.config, **updates)
        configure_logging(self.config.log_format, self.config.log_level)
        log.info("configuration reloaded", config=str(self.config.config))
        self.demand_changed.notify()
        await self.refresh()
        self.links_changed.notify()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve until cancelled; on the way out babeld is stopped and our addresses removed."""
        try:
            async with trio.open_nursery() as nursery:
                await self.refresh()
                nursery.start_soon(self._follow_kernel)
                await nursery.start(serve, self.config.socket_path, self.hub, self)
                nursery.start_soon(self._follow_demand)
                nursery.start_soon(self._supervise_mesh)
                nursery.start_soon(self._follow_collisions)
                task_status.started()
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(2.0):
                self.active = False
                await self.refresh()
                log.info("stopped", addresses_left=len(self.addresses_view()))
