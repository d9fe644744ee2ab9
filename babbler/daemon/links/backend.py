"""The one place that picks this platform's network backend (`Kernel`)."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager

from babbler.core.errors import EnvironmentProblem
from babbler.core.platform import IS_DARWIN, IS_LINUX, NAME
from babbler.daemon.links.kernel import Kernel


def open_kernel() -> AbstractAsyncContextManager[Kernel]:
    """The network backend of this platform. Raises EnvironmentProblem elsewhere."""
    if IS_LINUX:
        from babbler.daemon.links.linux import open_linux_kernel

        return open_linux_kernel()
    if IS_DARWIN:
        from babbler.daemon.links.darwin import open_darwin_kernel

        return open_darwin_kernel()
    raise EnvironmentProblem(f"{NAME} is not supported (Linux and macOS are)")
