"""An in-memory `Kernel`: links the test sets, addresses the daemon adds and removes."""

from __future__ import annotations

from dataclasses import replace

from babbler.core.links import AddressChange, Link
from babbler.daemon.wakeup import Signal


class FakeKernel:
    def __init__(self, *links: Link) -> None:
        self.links = {link.name: link for link in links}
        self.changed = Signal()
        self.route_flushes = 0

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
        addresses = set(link.addresses)
        (addresses.add if add else addresses.discard)(change.address)
        self.links[link.name] = replace(link, addresses=frozenset(addresses))
        self.changed.notify()

    async def add_address(self, change: AddressChange) -> None:
        self._edit(change, add=True)

    async def remove_address(self, change: AddressChange) -> None:
        self._edit(change, add=False)

    async def flush_babel_routes(self) -> int:
        self.route_flushes += 1
        return 0
