"""An in-memory `Kernel`: links the test sets, addresses the daemon adds and removes."""

from __future__ import annotations

from dataclasses import replace
from ipaddress import IPv4Address, IPv4Interface

from babbler.core.fence import Rule
from babbler.core.ipv4 import HostRoute
from babbler.core.links import AddressChange, Link
from babbler.daemon.sysctls import Settings
from babbler.daemon.wakeup import Signal


class FakeKernel:
    settings: Settings | None = None  # never the host's /proc/sys: a test may give ProcSys(dir)

    def __init__(self, *links: Link) -> None:
        self.links = {link.name: link for link in links}
        self.changed = Signal()
        self.route_flushes = 0
        self.routes_v4: list[HostRoute] = []  # the host's own IPv4 routes, as a test sets them
        self.rules: set[Rule] = set()

    def set_link(self, link: Link) -> None:
        self.links[link.name] = link
        self.changed.notify()

    def remove_link(self, name: str) -> None:
        del self.links[name]
        self.changed.notify()

    def addresses(self, name: str) -> set[str]:
        return {str(a) for a in self.links[name].addresses}

    async def read_links(self) -> dict[str, Link]:
        return dict(self.links)

    async def wait_for_change(self) -> None:
        await self.changed.event().wait()

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
        self.changed.notify()

    async def read_routes_v4(self) -> list[HostRoute]:
        return list(self.routes_v4)

    async def add_address(self, change: AddressChange) -> None:
        self._edit(change, add=True)

    async def remove_address(self, change: AddressChange) -> None:
        self._edit(change, add=False)

    async def flush_babel_routes(self) -> int:
        self.route_flushes += 1
        return 0

    async def read_rules(self) -> set[Rule]:
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
