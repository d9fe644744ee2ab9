"""Reconcile, don't react: every trigger (a netlink event, a cable, a subscriber, a reload, a
collision) leads to one `refresh`: re-read the links, plan the addresses (core/addrplan.py,
IPv4's through ipv4_service.py), apply the plan, let host care (hostcare.py) bring the host
along, tell whoever follows link changes. `refresh` is idempotent, so events the daemon
causes itself are harmless.

Here a kernel that fails or hangs is taken: a read that fails (or hangs: links/kernel.py
`Guarded`) ends the pass with the last good state kept, what the pass met shows as
`kernel_problem` and is logged once, and `retry` tries again with back-off
(core/kernelhealth.py).

The cables are followed here too (`follow_cables`): babeld's links and neighbours coming or
going (`cables_changed`), a cable kept after its neighbour left coming due, and another
node's answer that moves our IPv4 node address or offers a cable size (`node_answered`)
each lead to a pass.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog
import trio

from babbler.core import views
from babbler.core.addrplan import AddressPlan, IndexBook, plan, wanted_addresses
from babbler.core.config import Config
from babbler.core.errors import KernelError
from babbler.core.kernelhealth import KernelHealth
from babbler.core.links import Link, Selector, diff, keep_speeds, usable_names
from babbler.core.table import MeshTable
from babbler.daemon.hostcare import HostCare
from babbler.daemon.ipv4_service import Ipv4Service
from babbler.daemon.links.kernel import Kernel
from babbler.daemon.wakeup import Signal, run_on

log = structlog.get_logger("babbler.daemon")

# What a link's addresses changing looks like in `links.diff`: mostly the daemon's own doing.
ADDRESS_FIELDS = {"addresses", "deprecated", "addresses_v4"}


@dataclass(frozen=True)
class MeshReads:
    """What the reconcile reads of the mesh (a port), and whom it tells that the links'
    state changed besides `Reconcile.links_changed`'s followers (the node-level events)."""

    config: Callable[[], Config]
    node_id: Callable[[], int]
    table: Callable[[], MeshTable]
    publish: Callable[[], None]


class Reconcile:
    """Owns the links as last read, the address numbers (`book`) and whether the mesh is
    on (`active`: `set_active`, by the mesh's owner)."""

    def __init__(
        self,
        kernel: Kernel,
        ipv4: Ipv4Service,
        host: HostCare,
        health: KernelHealth,
        mesh: MeshReads,
        links_changed: Signal | None = None,
    ) -> None:
        self._kernel = kernel
        self._ipv4 = ipv4
        self._host = host
        self.health = health
        self._mesh = mesh
        self.links: dict[str, Link] = {}
        self.book = IndexBook()
        self.active = False
        self.links_changed = links_changed or Signal()
        self._lock = trio.Lock()
        self.cables_changed = Signal()  # babeld's links or neighbours came or went
        self._failed = Signal()  # a pass failed: `retry` tries again
        self._retry_in: float | None = None  # after the last pass; None: it went through
        self._unmatched: list[str] = []
        self._probes_wanted = Signal()  # usable links changed: new ones may need a probe

    @property
    def selector(self) -> Selector:
        config = self._mesh.config()
        return Selector(config.interface, config.exclude)

    def usable_names(self) -> set[str]:
        """The links babeld may use, as last read (on macOS a new one once its cable has
        its /31: ipv4_service.ready)."""
        usable = usable_names(self.links, self.selector)
        return {name for name in usable if self._ipv4.ready(name, self.links[name])}

    async def follow_probes(self) -> None:
        """Where babeld has no v4-via-v6: each new usable link's far end found before babeld
        is told (farprobe.py), then a pass (its /31), then babeld told."""

        async def one(name: str, index: int) -> None:
            link = self.links.get(name)
            if link is not None and link.index == index:
                await self._ipv4.probe(link)
            await self.refresh()
            self.links_changed.notify()  # babeld told now, its /31 added or not
            self.cables_changed.notify()  # a far end found is forgotten in time (next_expiry)
            await trio.sleep_until(self._ipv4.deadline((name, index)))
            self.links_changed.notify()  # its /31 never came: babeld told all the same

        async with trio.open_nursery() as nursery:
            while True:
                wanted = self._probes_wanted.event()
                for name, index in self._ipv4.to_probe(self.links, self._usable()):
                    nursery.start_soon(one, name, index)
                await wanted.wait()

    def _usable(self) -> set[str]:
        return usable_names(self.links, self.selector) if self.active else set()

    async def set_active(self, active: bool) -> None:
        """The mesh runs, or not (demand.py): the addresses follow."""
        self.active = active
        await self.refresh()
        self._probes_wanted.notify()

    async def refresh(self) -> None:
        """Re-read the links, bring the addresses to the plan, tell followers. Raises
        nothing of the kernel's."""
        async with self._lock:
            before = self.links
            problems: list[str] = []
            try:
                await self._pass(problems)
            except KernelError as error:
                problems.insert(0, str(error))
                if self.links is not before:  # read, then a later read failed: still news
                    self.links_changed.notify()
                    self._mesh.publish()
            self._kernel_checked(problems)

    async def retry(self) -> None:
        """After a pass the kernel spoiled, another after the back-off, until one goes
        through (nothing else may come: a quiet host sends no event)."""
        while True:
            failed = self._failed.event()
            if self._retry_in is None:
                await failed.wait()
                continue
            await trio.sleep(self._retry_in)
            await self.refresh()

    async def follow_kernel(self) -> None:
        while True:
            await self._kernel.wait_for_change()
            await self.refresh()

    async def follow_cables(self) -> None:
        """babeld's links and neighbours make the cable addresses (and their sizes): a
        pass when they change, when a cable held after its neighbour left is due to go, and
        after an IPv4 node address moved."""
        await run_on(self.cables_changed, self.refresh, self._ipv4.next_expiry)

    def node_answered(self, node: int, info: dict[str, Any]) -> None:
        """Another node's info came: it may hold our IPv4 node address (a collision), or
        the size it offers on a cable to this node: a pass now."""
        if self._ipv4.collision(node, info, self._mesh.node_id()):
            self.cables_changed.notify()  # re-address now
        elif self.active and self._host.mtu_targets(self.links):
            self.cables_changed.notify()  # resize now

    def _kernel_checked(self, problems: list[str]) -> None:
        verdict = self.health.after_pass(problems)
        for problem in verdict.said:
            log.error("kernel failed; last good state kept, retrying", problem=problem)
        if verdict.recovered:
            log.info("kernel answers again", failed_passes=verdict.recovered)
        self._retry_in = verdict.retry_in
        if verdict.retry_in is not None:
            self._failed.notify()

    async def _pass(self, problems: list[str]) -> None:
        """One pass of `refresh`; what fails on the way without ending it goes into
        `problems`. Raises KernelError (a read failed: nothing after it was done)."""
        kernel, selector, node_id = self._kernel, self.selector, self._mesh.node_id()
        new = keep_speeds(await kernel.read_links(), self.links)
        change = diff(self.links, new)
        self.links = new
        if change:
            # Address-only changes are mostly our own doing: keep them out of info logs.
            quiet = all(set(fields) <= ADDRESS_FIELDS for _, fields in change.changed)
            notable = change.added or change.removed or not quiet
            (log.info if notable else log.debug)("links changed", reasons=change.reasons())
        wanted = wanted_addresses(new, selector, node_id, self.book, self.active)
        six = plan(new, selector, node_id, wanted)
        four = await self._ipv4.plan(new, selector, self.active, self._mesh.table())
        if self._ipv4.read_problem:  # the last verdict on clashes stands meanwhile
            problems.append(self._ipv4.read_problem)
        todo = AddressPlan(six.add + four.add, six.remove + four.remove)
        steps = (
            ("remove", "removed", todo.remove, kernel.remove_address),
            ("add", "added", todo.add, kernel.add_address),
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
        self._ipv4.applied(c for c in failed if c in four.remove)
        resized = await self._host.apply(new, self.active, problems)
        if todo or resized:
            self.links = keep_speeds(await kernel.read_links(), self.links)
        if change or todo:
            self.links_changed.notify()
            self._mesh.publish()
            self._probes_wanted.notify()
        self._warn_unmatched()

    def _warn_unmatched(self) -> None:
        """Say once, when it becomes true, that an --interface pattern matches no link."""
        unmatched = views.unmatched_globs(self.links, self.selector)
        if unmatched and unmatched != self._unmatched:
            log.warning("--interface patterns match no link", patterns=unmatched)
        self._unmatched = unmatched
