"""IPv4 on the mesh as the daemon runs it (DESIGN.md "IPv4"): each reconcile brings the
node /32 and the cable /31s to plan (only recorded addresses are removed), the host's
routes are checked for a clash every CLASH_RECHECK seconds and at each reconcile, and
another node holding our node address moves the one of us with the larger node id. (IPv4
forwarding on mesh links is part of the kernel setup: hostsetup.py.)

What it decides that babeld must know (the filters: IPv4 on, off after a clash, a moved
node address) ends the running babeld through `restart`: its filters are fixed at start.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Interface, IPv6Address
from typing import Any

import structlog
import trio

from babbler.core.addressing import format_node_id
from babbler.core.addrplan import AddressPlan, plan_v4
from babbler.core.errors import KernelError
from babbler.core.links import AddressChange, Link, Links, Selector
from babbler.core.table import Applied, MeshTable, interface_view, neighbour_view
from babbler.daemon.farprobe import PROBE_EVERY, PROBE_FOR
from babbler.daemon.ipv4 import Cabled, Ipv4
from babbler.daemon.links.kernel import Kernel

log = structlog.get_logger("babbler.ipv4")

# How often the host's IPv4 routes are checked for a clash with the prefix when nothing else
# changes: routes come and go without a link or address event (a VPN, a static route).
CLASH_RECHECK = 5.0
# A cable address stays this long after babeld lost the neighbour at its far end (while its
# link is usable): removing an IPv4 address makes the kernel delete, silently, every route
# whose next hop it reached (babeld's routes via the far end's cable address among them),
# and babeld, which believes them installed, does not put them back until they change (seen:
# IPv4 unreachable for 64 s after a node of a ring died). By then babeld has long moved its
# routes away from a lost neighbour (about a second at hello 0.1 s); a neighbour that comes
# back meanwhile finds its address still there.
CABLE_HOLD = 30.0
# A cable pulled out (its link gone or unusable: Linux takes a Thunderbolt link away with
# its cable) keeps its address this long, as a /32 on the loopback that babeld announces,
# so a job's connection between two cable addresses takes a detour through the mesh until
# the cable is back (DESIGN.md "IPv4"). Thunderbolt links that drop under load or a cable
# re-seated come back within seconds; a far end gone for good should not keep an address
# in the mesh for longer than a job would wait for it.
DETOUR_HOLD = 60.0


def cable_ends_of(table: MeshTable) -> tuple[dict[str, IPv6Address], list[tuple[str, IPv6Address]]]:
    """babeld's links (name -> its link-local) and neighbours (link, link-local)."""
    interfaces = {}
    for entry in table.entries("interface"):
        view = interface_view(entry)
        if view["ipv6"]:
            interfaces[view["name"]] = IPv6Address(view["ipv6"])
    neighbours = []
    for entry in table.entries("neighbour"):
        view = neighbour_view(entry)
        if view["address"] and view["interface"]:
            neighbours.append((view["interface"], IPv6Address(view["address"])))
    return interfaces, neighbours


def moves_cables(applied: Applied) -> bool:
    """Whether a change of babeld's table may move what `cable_ends_of` reads: any change of
    a link babeld has (up or down, its link-local: a `change` babeld says when DAD ends or
    the link comes up) and a neighbour come or gone; not a neighbour's `change` (its costs,
    every few hellos)."""
    kind = applied.entry.kind
    return kind == "interface" or (kind == "neighbour" and applied.verb != "change")


Appearance = tuple[str, int]  # a link's name and index: one time it is there to use


@dataclass
class Probe:
    """What the far-end probe (farprobe.py) found on one appearance of a link, and until
    when the link waits for it before babeld is told all the same."""

    until: float  # trio time
    own: IPv6Address | None = None
    far: IPv6Address | None = None
    done: bool = False


class Ipv4Service:
    def __init__(
        self,
        state: Ipv4,
        kernel: Kernel,
        restart: Callable[[str], None],
        gated: bool = False,
        detours: bool = False,
    ) -> None:
        """`gated`: babeld has no v4-via-v6 here (macOS), so a new link waits for its /31
        before babeld is told (`ready`, farprobe.py). `detours`: a pulled cable's address
        is held on the loopback for DETOUR_HOLD (platform.cable_detours)."""
        self.state = state
        self._kernel = kernel
        self._restart = restart
        self._gated = gated
        self._detours = detours
        self.probes: dict[Appearance, Probe] = {}  # each appearance's far-end probe
        self.told: set[Appearance] = set()  # appearances `ready` let babeld have
        self.cables: list[Cabled] = []
        self._seen: dict[Cabled, float] = {}  # every cable held: when babeld last had it
        self._current: set[Cabled] = set()  # those babeld has now
        self.out: set[Cabled] = set()  # those held while their cable is out (on the loopback)
        self._wanted: set[tuple[str, IPv4Interface]] = set()
        self.read_problem: str | None = None  # the routes could not be read last time: why
        self._checked_at = -math.inf  # when a reconcile last checked for a clash (trio time)

    # -- what status and node info show --------------------------------------------------------

    def view(self) -> dict[str, Any]:
        state = self.state
        return {
            "ipv4_prefix": None if state.prefix is None else str(state.prefix),
            "node_address_v4": None if state.node_address is None else str(state.node_address),
            "ipv4_problem": state.problem,
            "addresses_v4": [  # a cable that is out is no cable to use (for a new job)
                {"interface": c.interface, "address": str(c.address), "peer": str(c.peer)}
                for c in self.cables
                if c not in self.out
            ],
        }

    # -- reconcile -----------------------------------------------------------------------------

    async def plan(
        self, links: Links, selector: Selector, active: bool, table: MeshTable
    ) -> AddressPlan:
        """What to add and remove now; the additions are recorded before they are made."""
        await self.check_clash()
        now = trio.current_time()
        self._end_appearances(links, selector, active)
        interfaces, neighbours = cable_ends_of(table)
        met = set(neighbours)
        for key, probe in self.probes.items():
            name = key[0]
            if (key in self.told and (name, probe.far) in met) or now >= probe.until + CABLE_HOLD:
                # babeld's word from now on (and the hold when it goes; a neighbour babeld
                # lists before it was told of this appearance is one it has not yet let go
                # from the last); or babeld never met the far end the probe found (a far
                # port still in a bridge): no /31
                probe.own = probe.far = None
            elif probe.own is not None and probe.far is not None:
                interfaces.setdefault(name, probe.own)
                neighbours.append((name, probe.far))
        current = self.state.cables(interfaces, neighbours) if active else []
        self._current = set(current)
        self._seen.update(dict.fromkeys(current, now))
        plugged = {c for c in self._seen if _usable(links, selector, c.interface)}

        def hold(cable: Cabled) -> float:  # one back from its detour keeps the longer hold
            if cable not in plugged:
                return self._out_hold
            return max(CABLE_HOLD, self._out_hold) if cable in self.out else CABLE_HOLD

        self._seen = {
            cable: seen
            for cable, seen in self._seen.items()
            if active and self.state.on and now - seen < hold(cable)
        }
        self.cables = sorted(self._seen, key=lambda c: (c.interface, c.address))
        self.out = set(self._seen) - plugged
        wanted = self.state.wanted(links, selector, active, self.cables, self.out)
        todo = plan_v4(links, wanted, self.state.recorded)
        self._wanted = {(name, a) for name, addresses in wanted.items() for a in addresses}
        if self.out:  # the loopback's cable addresses: not labelled as the node address
            held = {cable.address for cable in self.out}
            todo = AddressPlan(
                tuple(dataclasses.replace(c, held=c.address in held) for c in todo.add),
                todo.remove,
            )
        if todo.add:
            adds = {(c.interface, _interface(c)) for c in todo.add}
            self._keep_record(self.state.recorded | adds)
        return todo

    @property
    def _out_hold(self) -> float:
        """How long a cable that is out keeps its address: on the loopback for DETOUR_HOLD
        where detours run, else not at all."""
        return DETOUR_HOLD if self._detours else 0.0

    # -- new links on a platform without v4-via-v6 ----------------------------------------------

    # An appearance of a link begins when it is there, usable, with a live far end and the
    # mesh active, and ends when any of these stops (a cable pulled and plugged back, the
    # mesh released and wanted again: a new appearance, probed again). IPv4 turned on or off
    # ends none: a link babeld has stays with it.

    def ready(self, name: str, link: Link) -> bool:
        """Whether babeld may be told about `link` now: always where babeld has v4-via-v6;
        else not while the link has no live far end, and once per appearance: when the mesh
        has no IPv4, or the far-end probe found the far end and the cable's /31 is on the
        link, or found none (a LAN, a silent far end), or took too long (PROBE_FOR: then
        babeld may flush that link's routes once, as before). Told, it stays told for the
        rest of the appearance."""
        if not self._gated:
            return True
        key = (name, link.index)
        if link.carrier is False:
            return False
        if key in self.told:
            return True
        if not self._probed_enough(key, link):
            return False
        self.told.add(key)
        return True

    def _probed_enough(self, key: Appearance, link: Link) -> bool:
        if not self.state.on:
            return True
        probe = self.probes.get(key)
        now = trio.current_time()
        if probe is None or (not probe.done and now < probe.until):
            return False
        if probe.far is None or now >= probe.until:
            return True  # no far end found, or babeld met it already (plan forgot it)
        cable = next((c for c in self.cables if (c.interface, c.far) == (key[0], probe.far)), None)
        return cable is not None and any(a.ip == cable.address for a in link.addresses_v4)

    def to_probe(self, links: Links, usable: Iterable[str]) -> list[Appearance]:
        """The usable links to probe now (once per appearance, none babeld has already, none
        without a live far end), their probes begun."""
        if not self._gated or not self.state.on:
            return []
        until = trio.current_time() + PROBE_FOR
        new = [
            key
            for n in usable
            if links[n].carrier is not False
            and (key := (n, links[n].index)) not in self.probes
            and key not in self.told
        ]
        for key in new:
            self.probes[key] = Probe(until)
        return new

    def deadline(self, key: Appearance) -> float:
        """When `ready` stops waiting for this appearance's probe (trio time)."""
        probe = self.probes.get(key)
        return -math.inf if probe is None else probe.until

    def _end_appearances(self, links: Links, selector: Selector, active: bool) -> None:
        """Forget the probes and `told` of appearances that ended (see above)."""

        def going(key: Appearance) -> bool:
            link = links.get(key[0])
            return (
                active
                and link is not None
                and link.index == key[1]
                and selector.usable(link)
                and link.carrier is not False
            )

        self.probes = {key: probe for key, probe in self.probes.items() if going(key)}
        self.told = {key for key in self.told if going(key)}

    async def probe(self, link: Link) -> None:
        """Find the far end of one link (farprobe.py), trying until its probe's deadline."""
        key = (link.name, link.index)
        probe = self.probes.get(key)
        name = link.name
        try:
            # until its deadline, or its appearance ends (a pass forgot it)
            while probe is not None and self.probes.get(key) is probe:
                if trio.current_time() >= probe.until:
                    break
                own, others = await self._kernel.far_link_locals(link)
                if own is not None and len(others) == 1:
                    probe.own, probe.far = own, others.pop()
                    log.info("far end found before babeld", interface=name, far=str(probe.far))
                    break
                if len(others) > 1:
                    break  # a LAN: babeld's neighbours will say which cable is which
                await trio.sleep(PROBE_EVERY)
        except KernelError as error:
            log.warning("cannot probe for the far end", interface=name, error=str(error))
        finally:
            if probe is not None:
                probe.done = True

    def next_expiry(self) -> float:
        """When the next cable held after its neighbour left is due to go, or the next far
        end found by a probe and never met by babeld is forgotten (trio time)."""
        held = [
            seen + (self._out_hold if c in self.out else CABLE_HOLD)
            for c, seen in self._seen.items()
            if c not in self._current
        ]
        found = [p.until + CABLE_HOLD for p in self.probes.values() if p.far is not None]
        return min(held + found, default=math.inf)

    def applied(self, failed: Iterable[AddressChange]) -> None:
        """After the plan: the record is what is wanted, and removals that failed."""
        kept = {(c.interface, _interface(c)) for c in failed}
        self._keep_record(frozenset(self._wanted | kept))

    def _keep_record(self, entries: frozenset[tuple[str, IPv4Interface]]) -> None:
        if entries != self.state.recorded:
            problem = self.state.record(entries)
            if problem:
                log.warning("cannot record IPv4 addresses", error=problem)

    # -- clashes and collisions ----------------------------------------------------------------

    async def check_clash(self) -> None:
        """Read the host's IPv4 routes; a clash that starts or ends restarts babeld. Routes
        that cannot be read leave the last verdict standing, and `read_problem` says why
        (the daemon's reconcile reports it: reconcile.py)."""
        self.read_problem = None
        self._checked_at = trio.current_time()
        if self.state.prefix is None:
            return
        try:
            routes = await self._kernel.read_routes_v4()
        except KernelError as error:
            self.read_problem = str(error)
            return
        before = self.state.problem
        problem = self.state.check(routes)
        if problem == before:
            return
        if problem:
            log.error("IPv4 refused: the prefix clashes with the host's own", problem=problem)
        else:
            log.info("IPv4 on: the prefix no longer clashes", prefix=str(self.state.prefix))
        self._restart("IPv4 clash changed")

    async def follow_clashes(self, refresh: Callable[[], Awaitable[None]]) -> None:
        """Check for a clash at least every CLASH_RECHECK seconds, only when no reconcile
        checked meanwhile (on macOS one runs every 2 s anyway: the re-read). The check reads
        the routes alone; a reconcile follows only when the verdict changed (its addresses
        go or come back) or the routes could not be read (the pass reports it, and takes a
        failing kernel as every pass does). A whole pass every 5 s, links, addresses and
        sysctls read, was a third of a quiet node's CPU (docs/benchmarks.md)."""
        while True:
            due = self._checked_at + CLASH_RECHECK
            if trio.current_time() < due:
                await trio.sleep_until(due)
                continue
            before = self.state.problem
            await self.check_clash()
            if self.read_problem is not None or self.state.problem != before:
                await refresh()

    def collision(self, node_id: int, info: dict[str, Any], my_id: int) -> bool:
        """Another node's info names our IPv4 node address: the one with the larger node id
        takes its next candidate (both see it; nothing else of either node changes)."""
        mine = self.state.node_address
        if mine is None or info.get("node_address_v4") != str(mine) or my_id < node_id:
            return False
        problem = self.state.move()
        log.error(
            "IPv4 node address collision: moving",
            address=str(mine),
            other=format_node_id(node_id),
            now=str(self.state.node_address),
            persist_error=problem,
        )
        self._restart("IPv4 node address moved")
        return True


def _usable(links: Links, selector: Selector, name: str) -> bool:
    link = links.get(name)
    return link is not None and selector.usable(link)


def _interface(change: AddressChange) -> IPv4Interface:
    assert isinstance(change.address, IPv4Address)
    return IPv4Interface(f"{change.address}/{change.prefixlen}")
