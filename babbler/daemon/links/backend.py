"""The one place that picks the network backend (`Kernel`) of the platform babblerd acts as."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager

from babbler.core.platform import LINUX, Platform
from babbler.daemon.links.kernel import Kernel


def open_kernel(platform: Platform) -> AbstractAsyncContextManager[Kernel]:
    """The network backend of `platform`: netlink on Linux, PF_ROUTE and commands on macOS
    (in the lab, the lab's commands on Linux: docs/design.md)."""
    if platform is LINUX:
        from babbler.daemon.links.linux import open_linux_kernel

        return open_linux_kernel()
    from babbler.daemon.links.darwin import open_darwin_kernel

    return open_darwin_kernel()
