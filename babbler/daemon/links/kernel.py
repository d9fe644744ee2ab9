"""The small interface between the daemon and the operating system's network stack.

One implementation per platform (`linux`, `darwin`); tests use tests/fakes/kernel.py. The
daemon never calls the platform any other way, so this is the whole surface that needs root.
"""

from __future__ import annotations

from typing import Protocol

from babbler.core.fence import Rule
from babbler.core.ipv4 import HostRoute
from babbler.core.links import AddressChange, Link
from babbler.daemon.sysctls import Settings


class Kernel(Protocol):
    # Where the kernel's settings are (Linux: /proc/sys, macOS: sysctl(8)); None where
    # babblerd changes none (the tests' fake kernel, which must never touch the host's).
    settings: Settings | None

    async def read_links(self) -> dict[str, Link]:
        """Re-read every link with its state and addresses (both families)."""

    async def wait_for_change(self) -> None:
        """Return once something may have changed (a trigger, not the truth)."""

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
