"""Everything that differs between Linux and macOS, chosen in this one place.

The rest of babbler asks this module for the default directories and for the kernel backend;
nothing else looks at sys.platform.
"""

from __future__ import annotations

import sys
from contextlib import AbstractAsyncContextManager
from pathlib import Path

from babbler.errors import EnvironmentProblem
from babbler.links.kernel import Kernel

IS_LINUX = sys.platform.startswith("linux")
IS_DARWIN = sys.platform == "darwin"
NAME = "macOS" if IS_DARWIN else "Linux" if IS_LINUX else sys.platform

DEFAULT_RUN_DIR = Path("/var/run/babbler" if IS_DARWIN else "/run/babbler")
DEFAULT_STATE_DIR = Path("/var/db/babbler" if IS_DARWIN else "/var/lib/babbler")


def supported() -> bool:
    return IS_LINUX or IS_DARWIN


def open_kernel() -> AbstractAsyncContextManager[Kernel]:
    """The network backend of this platform."""
    if IS_LINUX:
        from babbler.links.linux import open_linux_kernel

        return open_linux_kernel()
    if IS_DARWIN:
        from babbler.links.darwin import open_darwin_kernel

        return open_darwin_kernel()
    raise EnvironmentProblem(f"{NAME} is not supported (Linux and macOS are)")
