"""What the mesh changes on this host besides addresses, as one apply and one undo: the
fence (core/fence.py planned, fence_rules.py kept), the kernel settings (hostsetup.py over
sysctls.py), links brought up that appear down, and each cable's MTU (core/mtu.py).

The daemon's reconcile calls `apply` on every pass with the links it read and whether the
mesh runs; `undo` on the way out puts down what was brought up and restores the settings;
`restore_leftovers` at start takes back what a crashed babblerd left. What host care needs
of the mesh comes through `MeshFacts`, a port of reads (and one ask), never the daemon.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import structlog
import trio

from babbler.core import fence, mtu
from babbler.core.addressing import MESH_PREFIX, format_node_id, node_range
from babbler.core.config import Config
from babbler.core.errors import KernelError
from babbler.core.farend import FarEnd, far_ends
from babbler.core.links import Link, Selector, selected_links, to_bring_up, usable_names
from babbler.core.table import MeshTable
from babbler.daemon.fence_rules import FenceRules
from babbler.daemon.hostsetup import FORWARDING, HostSetup
from babbler.daemon.ipv4_service import Ipv4Service
from babbler.daemon.links.kernel import Kernel
from babbler.daemon.sysctls import Sysctls

log = structlog.get_logger("babbler.daemon")


@dataclass(frozen=True)
class MeshFacts:
    """What host care reads of the mesh (a port): the settings, this node, IPv4, babeld's
    table, the other nodes' info answers; and the one thing it asks (the far end of a
    resized cable asked again for its offer)."""

    config: Callable[[], Config]
    keyed: bool
    node_id: Callable[[], int]
    ipv4: Ipv4Service
    table: Callable[[], MeshTable]
    infos: Callable[[], Iterable[tuple[int, Mapping[str, Any]]]]  # node id, its info answer
    ask_again: Callable[[Iterable[int]], None]


class HostCare:
    def __init__(self, kernel: Kernel, state_dir: Path, mesh: MeshFacts) -> None:
        self._kernel = kernel
        self._mesh = mesh
        self.sysctls = Sysctls(state_dir, kernel.settings)
        self._platform = mesh.config().platform  # fixed from the start: not reloadable
        self._setup = HostSetup(self.sysctls, self._platform)  # forwarding and RAs
        self._fence = FenceRules(kernel)  # the mesh's routes for the host and the mesh only
        self._tried: set[tuple[str, int]] = set()  # links brought up once (name, index)
        self._brought: dict[str, int] = {}  # ...and still up as babblerd left them
        self._mtu_refused: set[tuple[str, int, int]] = set()  # (link, index, size): said once

    @property
    def brought_up(self) -> frozenset[str]:
        """The links babblerd brought up that are still up as it left them."""
        return frozenset(self._brought)

    def _selector(self) -> Selector:
        config = self._mesh.config()
        return Selector(config.interface, config.exclude)

    async def restore_leftovers(self) -> list[str]:
        """What a babblerd of this boot that crashed left set, put back (off the loop:
        sysctl(8) on macOS)."""
        return await trio.to_thread.run_sync(self.sysctls.restore_leftovers)

    async def apply(self, links: dict[str, Link], active: bool, problems: list[str]) -> bool:
        """Bring the host to what the mesh needs now (`active`: it runs), in order: new fence
        rules before forwarding starts, the settings, links brought up, MTUs, old rules out
        after forwarding stopped. What fails without ending the pass goes into `problems`.
        Returns whether an MTU changed (the links need a re-read). Raises KernelError when
        the rules cannot be read."""
        config, selector = self._mesh.config(), self._selector()
        forwarding = usable_names(links, selector) if active else set()
        rules = self._fence_rules(forwarding, active)
        await self._fence.add(rules)
        chosen = selected_links(links, selector) if active else []
        selected = {link.name for link in chosen if not link.is_loopback}
        ipv4 = self._mesh.ipv4.state.on
        setup = partial(
            self._setup.apply, skip=config.skip_kernel_setup, ipv4=ipv4, selected=selected
        )
        # Off the loop: on macOS each setting is a sysctl(8) run (sysctls.COMMAND_TIMEOUT).
        problems += await trio.to_thread.run_sync(setup, links, forwarding)
        resized = False
        if active:  # after the setup: no DAD on them from the start
            await self._bring_up(links)
            resized = await self._fit_mtu(links)
        await self._fence.apply(rules)
        return resized

    async def undo(self, links: dict[str, Link]) -> None:
        """On stop, after a last `apply` with the mesh stopped: the links babblerd brought up
        go down again, as it found them, and the settings are put back."""
        for name, index in sorted(self._brought.items()):
            if not _still(links, name, index):
                continue
            try:
                await self._kernel.set_link_up(links[name], False)
                log.info("link put down", interface=name)
            except KernelError as error:
                log.warning("cannot put link down", interface=name, error=str(error))
        self._brought = {}
        await trio.to_thread.run_sync(self.sysctls.restore)

    def _fence_rules(self, mesh_links: set[str], active: bool) -> frozenset[fence.Rule]:
        """The policy-routing rules while the mesh runs (Linux: macOS has none): core/fence.py."""
        if not self._platform.fence or not active:
            return frozenset()
        before, _ = self.sysctls.changed.get(FORWARDING, (self.sysctls.read(FORWARDING), ""))
        v4 = self._mesh.ipv4.state
        cables = tuple(cable.address for cable in self._mesh.ipv4.cables)
        own = fence.Own(node_range(self._mesh.node_id()), v4.node_address, cables)
        # With a key, babeld's neighbours are the authenticated ones: a link forwards into
        # the mesh only while it has one (an outsider's spoofed packets go nowhere).
        carrying = None
        if self._mesh.keyed:
            table = self._mesh.table()
            neighbours = table.entries("neighbour")
            met = [(e.field("if") or "", e.field("address") or "") for e in neighbours]
            mine = [e.field("ipv6") or "" for e in table.entries("interface")]
            carrying = fence.carrying(met, mine)
        prefix_v4 = v4.prefix if v4.on else None
        return fence.plan(mesh_links, MESH_PREFIX, prefix_v4, before == "0", own, carrying)

    async def _bring_up(self, links: dict[str, Link]) -> None:
        """Thunderbolt links (and --bring-up ones) that appear down come up, once each
        (linux.py creates thunderbolt-net links down; nothing else may bring them up)."""
        self._brought = {n: i for n, i in self._brought.items() if _still(links, n, i)}
        bring_up = self._mesh.config().bring_up
        for link in to_bring_up(links, self._selector(), bring_up, self._tried):
            self._tried.add((link.name, link.index))
            try:
                await self._kernel.set_link_up(link, True)
            except KernelError as error:
                log.warning("cannot bring link up", interface=link.name, error=str(error))
                continue
            self._brought[link.name] = link.index
            log.info("link brought up", interface=link.name)

    def _far_ends(self) -> tuple[list[FarEnd], dict[str, Mapping[str, Any]]]:
        """The far end of each of our links (core/farend.py), and the infos it was found in."""
        infos = {format_node_id(node): info for node, info in self._mesh.infos()}
        me = format_node_id(self._mesh.node_id())
        return far_ends(self._mesh.table(), infos.items(), me), infos

    def mtu_targets(self, links: dict[str, Link]) -> dict[str, int]:
        """Each sized mesh link's MTU as both ends offer it (core/mtu.py), where it differs."""
        ends, infos = self._far_ends()
        far = mtu.far_offers(ends, infos)
        used = [links[name] for name in usable_names(links, self._selector())]
        return mtu.targets(used, self._mesh.config().mtu, far)

    async def _fit_mtu(self, links: dict[str, Link]) -> bool:
        """Both ends of each sized cable at the same, largest, MTU; True if one changed."""
        changed = False
        for name, size in sorted(self.mtu_targets(links).items()):
            link = links[name]
            if (name, link.index, size) in self._mtu_refused:
                continue  # the driver said no to this size: not every refresh again
            try:
                await self._kernel.set_mtu(link, size)
            except KernelError as error:
                self._mtu_refused.add((name, link.index, size))
                log.warning("cannot set MTU", interface=name, mtu=size, error=str(error))
                continue
            changed = True
            log.info("MTU set", interface=name, mtu=size, was=link.mtu)
            ends, _ = self._far_ends()
            far = {end.node for end in ends if end.link == name and end.babeld_knows}
            self._mesh.ask_again(int(node, 16) for node in far)  # the far end follows
        return changed


def _still(links: dict[str, Link], name: str, index: int) -> bool:
    """The link babblerd brought up is there, the same one, and up."""
    link = links.get(name)
    return link is not None and link.index == index and link.up
