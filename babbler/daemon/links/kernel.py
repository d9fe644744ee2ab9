"""The small interface between the daemon and the operating system's network stack.

One implementation per platform (`linux`, `darwin`); tests use tests/fakes/kernel.py. The
daemon never calls the platform any other way, so this is the whole surface that needs root.
The daemon reaches it through `Guarded`: no call of it may hang, and no answer is trusted
blindly (docs/reliability.md, "The kernel fails").
"""

from __future__ import annotations

import errno
from collections.abc import Awaitable, Callable
from ipaddress import IPv6Address
from typing import Protocol, TypeVar

import structlog
import trio

from babbler.core.errors import KernelError
from babbler.core.fence import Rule
from babbler.core.ipv4 import HostRoute
from babbler.core.links import AddressChange, Link
from babbler.daemon.sysctls import Settings

log = structlog.get_logger("babbler.links")

# How long one call may take before it counts as hung. A netlink dump answers in
# milliseconds; a macOS read runs a few commands (~0.1 s in all, networksetup the slowest),
# each of which gives up after sysctls.COMMAND_TIMEOUT: twice that lets it say which hung.
KERNEL_DEADLINE = 6.0
# Removing babeld's routes one by one after a crash (on macOS one `route` command each, a few
# ms) may take seconds on a large mesh; a minute is a hang. (babeld's start retries.)
FLUSH_DEADLINE = 60.0
# When the change events themselves fail (not ENOBUFS: that is a lost event), every link is
# re-read this often instead: as macOS does between its route socket's messages.
EVENTS_FALLBACK = 2.0

T = TypeVar("T")


class Kernel(Protocol):
    # Where the kernel's settings are (Linux: /proc/sys, macOS: sysctl(8)); None where
    # babblerd changes none (the tests' fake kernel, which must never touch the host's).
    settings: Settings | None

    async def read_links(self) -> dict[str, Link]:
        """Re-read every link with its state and addresses (both families)."""

    async def wait_for_change(self) -> None:
        """Return once something may have changed (a trigger, not the truth)."""

    # Whether `wait_for_route_change` says when babeld's routes change (Linux: netlink's
    # route groups). Where it does not, babeld's table is dumped every second (mesh.py).
    routes_trigger: bool

    async def wait_for_route_change(self) -> None:
        """Return once a route of babeld's may have come, gone or moved in the kernel (a
        trigger, as `wait_for_change`); never where `routes_trigger` is False."""

    async def add_address(self, change: AddressChange) -> None:
        """Add (or replace) an address: IPv6 without duplicate address detection, perhaps
        not preferred as a source; IPv4 with its prefix length. Raises KernelError."""

    async def remove_address(self, change: AddressChange) -> None:
        """Remove an address (one already gone is not an error). Raises KernelError."""

    async def read_routes_v4(self) -> list[HostRoute]:
        """The host's own IPv4 routes, every table, babeld's left out (the clash check)."""

    async def flush_babel_routes(self) -> int:
        """Remove the kernel routes babeld installed (proto babel), both families; return
        how many."""

    async def read_rules(self) -> set[Rule]:
        """babblerd's policy-routing rules in the kernel (Linux; none elsewhere)."""

    async def add_rule(self, rule: Rule) -> None:
        """Add a rule unless it is there. Raises KernelError."""

    async def remove_rule(self, rule: Rule) -> None:
        """Remove a rule (one already gone is not an error). Raises KernelError."""

    async def set_link_up(self, link: Link, up: bool) -> None:
        """Set a link administratively up or down. Raises KernelError."""

    async def set_mtu(self, link: Link, size: int) -> None:
        """Set a link's MTU in bytes. Raises KernelError."""

    async def far_link_locals(self, link: Link) -> tuple[IPv6Address | None, set[IPv6Address]]:
        """(this end's link-local, the others' on the link), asked on the link itself
        (daemon/farprobe.py: an echo to ff02::1 there; asked only where babeld has no
        v4-via-v6, every backend's is farprobe's). Raises KernelError."""


def nonsense(links: object) -> str | None:
    """Why a link snapshot cannot be true (a backend that parsed garbage), or None."""
    if not isinstance(links, dict):
        return f"not a table of links but {type(links).__name__}"
    names: dict[int, str] = {}
    for name, link in links.items():
        if not isinstance(link, Link):
            return f"{name!r} is not a link"
        if not name or link.name != name:
            return f"link {link.name!r} listed as {name!r}"
        if not isinstance(link.index, int) or link.index <= 0:
            return f"link {name!r} has index {link.index!r}"
        if link.index in names:
            return f"links {names[link.index]!r} and {name!r} have one index, {link.index}"
        names[link.index] = name
    return None


class Guarded:
    """A `Kernel` as the daemon uses it: every call ends within `deadline` seconds (a hang is
    a KernelError with ETIMEDOUT), a failed read says what it read (`cannot read links:
    ...`), a link snapshot that cannot be true is refused (KernelError), and failing change
    events turn into a re-read every EVENTS_FALLBACK seconds. Raises only KernelError."""

    def __init__(self, kernel: Kernel, deadline: float = KERNEL_DEADLINE) -> None:
        self._kernel = kernel
        self.settings = kernel.settings
        self.routes_trigger = kernel.routes_trigger  # False once its events fail
        self.deadline = deadline
        self._events_failed = False

    async def _bounded(
        self, call: Callable[[], Awaitable[T]], what: str = "", deadline: float | None = None
    ) -> T:
        seconds = self.deadline if deadline is None else deadline
        try:
            with trio.fail_after(seconds):
                return await call()
        except trio.TooSlowError:
            error = KernelError(f"no answer in {seconds:g} s", errno.ETIMEDOUT)
        except KernelError as failed:
            error = failed
        if not what:
            raise error
        raise KernelError(f"{what}: {error}", error.errno) from None

    async def read_links(self) -> dict[str, Link]:
        links = await self._bounded(self._kernel.read_links, "cannot read links")
        wrong = nonsense(links)
        if wrong is not None:
            raise KernelError(f"cannot read links: nonsense ({wrong})", errno.EIO)
        return links

    async def wait_for_change(self) -> None:
        try:
            await self._kernel.wait_for_change()
        except (OSError, KernelError) as error:
            if not self._events_failed:
                log.warning("link events fail; re-reading every link instead", error=str(error))
            self._events_failed = True
            await trio.sleep(EVENTS_FALLBACK)

    async def wait_for_route_change(self) -> None:
        if not self.routes_trigger:
            await trio.sleep_forever()
        try:
            await self._kernel.wait_for_route_change()
        except (OSError, KernelError) as error:
            log.warning("route events fail; babeld's table read every second", error=str(error))
            self.routes_trigger = False
            await trio.sleep_forever()

    async def add_address(self, change: AddressChange) -> None:
        await self._bounded(lambda: self._kernel.add_address(change))

    async def remove_address(self, change: AddressChange) -> None:
        await self._bounded(lambda: self._kernel.remove_address(change))

    async def read_routes_v4(self) -> list[HostRoute]:
        return await self._bounded(self._kernel.read_routes_v4, "cannot read IPv4 routes")

    async def flush_babel_routes(self) -> int:
        return await self._bounded(self._kernel.flush_babel_routes, deadline=FLUSH_DEADLINE)

    async def read_rules(self) -> set[Rule]:
        return await self._bounded(self._kernel.read_rules, "cannot read rules")

    async def add_rule(self, rule: Rule) -> None:
        await self._bounded(lambda: self._kernel.add_rule(rule))

    async def remove_rule(self, rule: Rule) -> None:
        await self._bounded(lambda: self._kernel.remove_rule(rule))

    async def set_link_up(self, link: Link, up: bool) -> None:
        await self._bounded(lambda: self._kernel.set_link_up(link, up))

    async def set_mtu(self, link: Link, size: int) -> None:
        await self._bounded(lambda: self._kernel.set_mtu(link, size))

    async def far_link_locals(self, link: Link) -> tuple[IPv6Address | None, set[IPv6Address]]:
        return await self._bounded(lambda: self._kernel.far_link_locals(link))
