"""The daemon: wires the kernel, the address plan, the mesh supervisor, identity, views and
the fan-out, and owns the mesh's lifecycle.

Reconcile, don't react: any trigger (a netlink event, a client subscribing, a reload) leads to
one `refresh`: re-read the links, plan the addresses, apply the plan, tell whoever follows
link changes. `refresh` is idempotent, so events the daemon causes itself are harmless.
The supervisor reports facts (`_on_fact`); the view (view.py) publishes them, and is what
clients and other nodes read.
"""

from __future__ import annotations

import math
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import structlog
import trio

from babbler.core import views
from babbler.core.addressing import node_address
from babbler.core.addrplan import AddressPlan, IndexBook, plan, wanted_addresses
from babbler.core.config import Config, down_hold, reloaded
from babbler.core.errors import ConfigError, KernelError
from babbler.core.kernelhealth import RETRY_CAP, RETRY_FIRST, KernelHealth
from babbler.core.links import (
    Link,
    Selector,
    diff,
    keep_speeds,
    usable_names,
)
from babbler.core.meshkey import MeshKey
from babbler.core.table import Applied
from babbler.daemon.babeld.launch import Launch, launch_for, link_options
from babbler.daemon.demand import Demand, run_mesh, say_lonely_links
from babbler.daemon.early import Early
from babbler.daemon.fanout import Hub, Limits
from babbler.daemon.hostcare import HostCare, MeshFacts
from babbler.daemon.identity import Identity
from babbler.daemon.ipv4 import Ipv4
from babbler.daemon.ipv4_service import Ipv4Service
from babbler.daemon.links.kernel import KERNEL_DEADLINE, Guarded, Kernel
from babbler.daemon.log import configure as configure_logging
from babbler.daemon.mesh import Fact, Mesh, MeshHost, MeshTunables
from babbler.daemon.nodeid import NodeId
from babbler.daemon.nodes.service import NodeService
from babbler.daemon.responder import run_responder
from babbler.daemon.responder import wanted as bench_wanted
from babbler.daemon.server import PublicSocket
from babbler.daemon.view import Host, View
from babbler.daemon.wakeup import Signal, rerun_on

log = structlog.get_logger("babbler.daemon")

# What a link's addresses changing looks like in `links.diff`: mostly the daemon's own doing.
ADDRESS_FIELDS = {"addresses", "deprecated", "addresses_v4"}


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
        self.links: dict[str, Link] = {}
        self.book = IndexBook()
        self.active = False
        self.links_changed = Signal()
        self.hub = Hub(self._subscribers_changed, tunables.clients)
        self.demand = Demand(lambda: self.config, lambda: self.hub.subscribers)
        self._early = early
        self.mesh = Mesh(
            MeshHost(
                launch=self._launch,
                interface_options=self.interface_options,
                usable_names=self.usable_names,
                links_changed=self.links_changed,
                kernel=kernel,
                report=self._on_fact,
                adopt=self._adopt,
                hello_interval=lambda: self.config.hello_interval,
            ),
            tunables.mesh,
        )
        self.mesh.set_watched(False)
        self.ipv4 = Ipv4Service(
            Ipv4.load(config.ipv4_prefix, config.state_dir, node.value),
            kernel,
            restart=self._ipv4_changed,
        )
        self.cables_changed = Signal()  # babeld's links or neighbours came or went
        self._refresh_lock = trio.Lock()
        self.kernel_health = KernelHealth(*tunables.kernel_retry)
        self._kernel_retry = trio.Event()  # a pass failed: `_retry_refresh` tries again
        self._retry_in = 0.0
        self._collision_check = trio.Event()
        self._unmatched: list[str] = []
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

    # -- who this node is; what serve.py and the tests read (the view's) -----------------------

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

    def facts(self, asker: object = None, with_nodes: bool = True) -> views.Facts:
        return self.view.facts(asker, with_nodes)

    @property
    def my_id(self) -> str:
        return self.view.my_id

    def header(self) -> list[str]:
        return self.view.header()

    def settle(self) -> None:
        self.view.settle()

    def dump_lines(self) -> list[str]:
        return self.view.dump_lines()

    # -- facts in, events out ------------------------------------------------------------------

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

    # -- babeld --------------------------------------------------------------------------------

    def interface_options(self, name: str) -> str:
        """The options of babeld's `interface NAME ...` line for this link now."""
        keyed, via_v6 = self.key is not None, self.ipv4.state.via_v6
        return link_options(self.config, keyed, via_v6, self.links.get(name))

    def _launch_on(self, first: str, router_id: str) -> Launch:
        state, node_id = self.ipv4.state, self.node_id
        return launch_for(
            self.config, self.key, state, node_id, router_id, first, self.links.get(first)
        )

    def _launch(self, first: str) -> Launch:
        self.view.find_babeld()
        self.identity.new_babeld(self.config.hello_interval)
        return self._launch_on(first, self.identity.take_router_id())

    async def _bench_responder(self) -> None:
        """The bench responder on the node addresses (moved when either changes)."""
        address = str(node_address(self.node_id))
        ipv4 = self.ipv4.state
        address_v4 = None if ipv4.node_address is None else str(ipv4.node_address)
        prefix = None if ipv4.prefix is None else str(ipv4.prefix)
        await run_responder(address, self.config.bench_port, address_v4, prefix)

    def _ipv4_changed(self, reason: str) -> None:
        """IPv4 turned on or off, or its node address moved: babeld's filters are fixed at
        start, and the services on the node addresses follow."""
        self.mesh.restart_babeld(reason)
        self.node_moved.notify()

    def _adopt(self) -> tuple[Launch, subprocess.Popen[bytes]] | None:
        """The babeld started early, once: adopted when its link is usable in the netlink
        view too, else stopped (the daemon then starts its own)."""
        early, self._early = self._early, None
        if early is None:
            return None
        first = early.launch.first_interface
        # The launch this daemon would start under the early one's router id: anything else
        # (IPv4 decided otherwise since, the link's cost, ...) is a babeld of its own.
        drifted = self._launch_on(first, early.launch.router_id) != early.launch
        if first not in self.usable_names() or early.popen.poll() is not None or drifted:
            log.info("babeld started early not adopted", interface=first, drifted=drifted)
            early.stop()
            return None
        self.identity.new_babeld(self.config.hello_interval)
        early.adopted = True
        return early.launch, early.popen

    # -- reconcile -----------------------------------------------------------------------------

    async def refresh(self) -> None:
        """Re-read the links, bring the addresses to the plan, tell followers. Every trigger
        comes here, so here a kernel that fails or hangs is taken: a read that fails (or
        hangs: `Guarded`) ends the pass with the last good state kept, what the pass met
        shows as `kernel_problem` and is logged once, and `_retry_refresh` tries again
        with back-off. Raises nothing of the kernel's."""
        async with self._refresh_lock:
            before = self.links
            problems: list[str] = []
            try:
                await self._reconcile(problems)
            except KernelError as error:
                problems.insert(0, str(error))
                if self.links is not before:  # read, then a later read failed: still news
                    self.links_changed.notify()
                    self.view.publish_node()
            self._kernel_checked(problems)

    def _kernel_checked(self, problems: list[str]) -> None:
        verdict = self.kernel_health.after_pass(problems)
        for problem in verdict.said:
            log.error("kernel failed; last good state kept, retrying", problem=problem)
        if verdict.recovered:
            log.info("kernel answers again", failed_passes=verdict.recovered)
        if verdict.retry_in is not None:
            self._retry_in = verdict.retry_in
            self._kernel_retry.set()

    async def _retry_refresh(self) -> None:
        """After a pass the kernel spoiled, another after the back-off, until one goes
        through (nothing else may come: a quiet host sends no event)."""
        while True:
            await self._kernel_retry.wait()
            self._kernel_retry = trio.Event()
            await trio.sleep(self._retry_in)
            await self.refresh()

    async def _reconcile(self, problems: list[str]) -> None:
        """One pass of `refresh`; what fails on the way without ending it goes into
        `problems`. Raises KernelError (a read failed: nothing after it was done)."""
        new = keep_speeds(await self.kernel.read_links(), self.links)
        change = diff(self.links, new)
        self.links = new
        if change:
            # Address-only changes are mostly our own doing: keep them out of info logs.
            quiet = all(set(fields) <= ADDRESS_FIELDS for _, fields in change.changed)
            notable = change.added or change.removed or not quiet
            (log.info if notable else log.debug)("links changed", reasons=change.reasons())
        wanted = wanted_addresses(new, self.selector, self.node_id, self.book, self.active)
        six = plan(new, self.selector, self.node_id, wanted)
        four = await self.ipv4.plan(new, self.selector, self.active, self.mesh.table)
        if self.ipv4.read_problem:  # the last verdict on clashes stands meanwhile
            problems.append(self.ipv4.read_problem)
        todo = AddressPlan(six.add + four.add, six.remove + four.remove)
        steps = (
            ("remove", "removed", todo.remove, self.kernel.remove_address),
            ("add", "added", todo.add, self.kernel.add_address),
        )
        failed = []
        for verb, done, items, apply in steps:
            for item in items:
                where = {"interface": item.interface, "address": str(item.address)}
                try:
                    await apply(item)
                    log.info(f"address {done}", **where)
                except KernelError as error:
                    failed.append(item)
                    problems.append(
                        f"cannot {verb} address {item.address} on {item.interface}: {error}"
                    )
        self.ipv4.applied(c for c in failed if c in four.remove)
        resized = await self.host.apply(new, self.active, problems)
        if todo or resized:
            self.links = keep_speeds(await self.kernel.read_links(), self.links)
        if change or todo:
            self.links_changed.notify()
            self.view.publish_node()
        self._warn_unmatched()

    def _warn_unmatched(self) -> None:
        """Say once, when it becomes true, that an --interface pattern matches no link."""
        unmatched = views.unmatched_globs(self.links, self.selector)
        if unmatched and unmatched != self._unmatched:
            log.warning("--interface patterns match no link", patterns=unmatched)
        self._unmatched = unmatched

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
            self.book.forget_all()
            self.mesh.restart_babeld("node id changed")
            await self.refresh()
            self.view.publish_node()

    def _node_answered(self, node: int, info: dict[str, Any]) -> None:
        """Another node's info came: it may hold our IPv4 node address (a collision), or
        the size it offers on a cable to this node."""
        if self.ipv4.collision(node, info, self.node_id):
            self.cables_changed.notify()  # re-address now
        elif self.active and self.host.mtu_targets(self.links):
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

    async def _follow_kernel(self) -> None:
        while True:
            await self.kernel.wait_for_change()
            await self.refresh()

    # -- lifecycle -----------------------------------------------------------------------------

    async def _set_active(self, active: bool) -> None:
        self.active = active
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
        self.links_changed.notify()

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
                nursery.start_soon(self._retry_refresh)
                await self.refresh()
                nursery.start_soon(self._follow_kernel)
                nursery.start_soon(self._follow_cables)
                nursery.start_soon(self.ipv4.follow_clashes, self.refresh)
                nursery.start_soon(run_mesh, self.demand, self._set_active, self._run_with_mesh)
                nursery.start_soon(self._follow_collisions)
                await nursery.start(public.serve, self.hub, self.view)
                task_status.started()
        finally:
            public.close()
            with trio.CancelScope(shield=True), trio.move_on_after(2.0):
                self.active = False
                await self.refresh()
                await self.host.undo(self.links)
                log.info("stopped", addresses_left=len(views.addresses(self.facts())))
