"""An in-memory `Kernel`: links the test sets, addresses the daemon adds and removes; and
faults a test injects into its reads (`fail`, `nonsense`, `hang`), and into its settings
(`FaultySettings`: a sysctl(8) that fails or hangs)."""

from __future__ import annotations

import errno
import threading
from collections import Counter
from dataclasses import replace
from ipaddress import IPv4Address, IPv4Interface, IPv6Address

import trio

from babbler.core.errors import KernelError
from babbler.core.fence import Rule
from babbler.core.ipv4 import HostRoute
from babbler.core.links import AddressChange, Link
from babbler.daemon.sysctls import Settings
from babbler.daemon.wakeup import Signal

READS = ("read_links", "read_routes_v4", "read_rules")
FAULTS = ("fail", "nonsense", "hang")


class FakeKernel:
    settings: Settings | None = None  # never the host's /proc/sys: a test may give ProcSys(dir)

    def __init__(self, *links: Link) -> None:
        self.links = {link.name: link for link in links}
        self.changed = Signal()
        self._changes = 0  # notifies so far, and how many `wait_for_change` has passed on:
        self._passed_on = 0  # a change while the daemon's pass runs is kept, as netlink's are
        self.routes = Signal()  # babeld's routes changed (`route_changed`)
        self._route_changes = self._route_passed = 0
        self.route_flushes = 0
        self.routes_v4: list[HostRoute] = []  # the host's own IPv4 routes, as a test sets them
        self.rules: set[Rule] = set()
        self.reads: Counter[str] = Counter()  # calls of each read, faulty ones too
        self._faults: dict[str, tuple[str, int | None]] = {}  # read -> (fault, times left)
        self.hanging = 0  # reads hanging now
        # link -> (this end's link-local, the far ends' ones), as an echo to ff02::1 finds
        self.far: dict[str, tuple[IPv6Address | None, set[IPv6Address]]] = {}
        self.far_delay = 0.0

    # -- faults --------------------------------------------------------------------------------

    def inject(self, read: str, fault: str, times: int | None = 1) -> None:
        """The next `times` calls of `read` (READS) fail with a netlink error, answer
        nonsense (links under names that are not theirs, all with index 0: read_links
        only), or hang until cancelled; `times` None: until `heal`."""
        assert read in READS and fault in FAULTS and (fault != "nonsense" or read == READS[0])
        self._faults[read] = (fault, times)

    def heal(self) -> None:
        self._faults.clear()

    async def _fault(self, read: str) -> bool:
        """Play the fault due for this call of `read`; True when it answers nonsense."""
        self.reads[read] += 1
        fault, times = self._faults.get(read, ("", 0))
        if not fault:
            return False
        if times is not None:
            if times <= 1:
                del self._faults[read]
            else:
                self._faults[read] = (fault, times - 1)
        if fault == "fail":
            raise KernelError(f"{read}: Cannot allocate memory", errno.ENOMEM)
        if fault == "hang":
            self.hanging += 1
            try:
                await trio.sleep_forever()
            finally:
                self.hanging -= 1
        return True

    def notify(self) -> None:
        """Something changed: the daemon's next `wait_for_change` returns at once."""
        self._changes += 1
        self.changed.notify()

    def set_link(self, link: Link) -> None:
        self.links[link.name] = link
        self.notify()

    def remove_link(self, name: str) -> None:
        del self.links[name]
        self.notify()

    def addresses(self, name: str) -> set[str]:
        return {str(a) for a in self.links[name].addresses}

    async def read_links(self) -> dict[str, Link]:
        if await self._fault("read_links"):
            return {f"x{name}": replace(link, index=0) for name, link in self.links.items()}
        return dict(self.links)

    routes_trigger = False  # a test sets True, and `route_changed()` plays babeld's route events

    def route_changed(self) -> None:
        self._route_changes += 1
        self.routes.notify()

    async def wait_for_route_change(self) -> None:
        if not self.routes_trigger:
            await trio.sleep_forever()
        while self._route_passed == self._route_changes:
            await self.routes.event().wait()
        self._route_passed = self._route_changes

    async def wait_for_change(self) -> None:
        """Like a netlink socket's queue, a change made while nobody waited is not lost."""
        while self._passed_on == self._changes:
            await self.changed.event().wait()
        self._passed_on = self._changes

    def _edit(self, change: AddressChange, add: bool) -> None:
        link = self.links.get(change.interface)
        if link is None:
            return
        if isinstance(change.address, IPv4Address):
            v4 = set(link.addresses_v4)
            entry = IPv4Interface(f"{change.address}/{change.prefixlen}")
            (v4.add if add else v4.discard)(entry)
            self.links[link.name] = replace(link, addresses_v4=frozenset(v4))
        else:
            addresses, deprecated = set(link.addresses), set(link.deprecated)
            (addresses.add if add else addresses.discard)(change.address)
            deprecated.discard(change.address)
            if add and change.deprecated:
                deprecated.add(change.address)
            self.links[link.name] = replace(
                link, addresses=frozenset(addresses), deprecated=frozenset(deprecated)
            )
        self.notify()

    async def far_link_locals(self, link: Link) -> tuple[IPv6Address | None, set[IPv6Address]]:
        """The far ends a test put on the link (`far`), after `far_delay` (the echo's round
        trip and answers waited for): no packet leaves the test."""
        await trio.sleep(self.far_delay)
        return self.far.get(link.name, (None, set()))

    async def read_routes_v4(self) -> list[HostRoute]:
        await self._fault("read_routes_v4")
        return list(self.routes_v4)

    async def add_address(self, change: AddressChange) -> None:
        self._edit(change, add=True)

    async def remove_address(self, change: AddressChange) -> None:
        self._edit(change, add=False)

    async def flush_babel_routes(self) -> int:
        self.route_flushes += 1
        return 0

    async def read_rules(self) -> set[Rule]:
        await self._fault("read_rules")
        return set(self.rules)

    async def add_rule(self, rule: Rule) -> None:
        self.rules.add(rule)

    async def remove_rule(self, rule: Rule) -> None:
        self.rules.discard(rule)

    async def set_link_up(self, link: Link, up: bool) -> None:
        if link.name in self.links:
            self.set_link(replace(self.links[link.name], up=up))

    async def set_mtu(self, link: Link, size: int) -> None:
        if link.name in self.links:
            self.set_link(replace(self.links[link.name], mtu=size))


class FaultySettings:
    """Kernel settings on a dict (every setting "0" until set), read and written as macOS's
    sysctl(8) is: blocking the calling thread. `hang` makes reads of one setting block for
    a while, then answer nothing, as a sysctl(8) ended by its timeout does."""

    boot_name = "kern.bootsessionuuid"

    def __init__(self) -> None:
        self.values: dict[str, str] = {self.boot_name: "fake-boot"}
        self._hangs: dict[str, tuple[float, int]] = {}  # name -> (seconds, times)
        self.threads: set[str] = set()  # the threads that read `hang`'s settings

    def hang(self, seconds: float, name: str, times: int = 1) -> None:
        self._hangs[name] = (seconds, times)

    def read(self, name: str) -> str | None:
        if name in self._hangs:
            self.threads.add(threading.current_thread().name)
            seconds, times = self._hangs.pop(name)
            if times > 1:
                self._hangs[name] = (seconds, times - 1)
            threading.Event().wait(seconds)  # blocks as subprocess.run(timeout=...) does
            return None
        return self.values.get(name, "0")

    def write(self, name: str, value: str) -> None:
        self.values[name] = value

    def forget(self, name: str | None = None) -> None:
        return None  # keeps nothing read: every read is afresh
