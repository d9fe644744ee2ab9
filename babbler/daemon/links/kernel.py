"""The small interface between the daemon and the operating system's network stack.

One implementation per platform (`linux`, `darwin`); tests use tests/fakes/kernel.py. The
daemon never calls the platform any other way, so this is the whole surface that needs root.
"""

from __future__ import annotations

from typing import Protocol

from babbler.core.links import AddressChange, Link


class Kernel(Protocol):
    async def read_links(self) -> dict[str, Link]:
        """Re-read every link with its state and IPv6 addresses."""

    async def wait_for_change(self) -> None:
        """Return once something may have changed (a trigger, not the truth)."""

    async def add_address(self, change: AddressChange) -> None:
        """Add a /128 without duplicate address detection. Raises KernelError."""

    async def remove_address(self, change: AddressChange) -> None:
        """Remove a /128 (an address already gone is not an error). Raises KernelError."""

    async def flush_babel_routes(self) -> int:
        """Remove the kernel routes babeld installed (proto babel); return how many."""
