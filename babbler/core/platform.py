"""Platform facts, as constants: which system this is and its default directories.

A leaf module (it imports nothing of babbler), so anything may read it. Choosing the network
backend lives in `links.backend`.
"""

from __future__ import annotations

import sys
from pathlib import Path

IS_LINUX = sys.platform.startswith("linux")
IS_DARWIN = sys.platform == "darwin"
NAME = "macOS" if IS_DARWIN else "Linux" if IS_LINUX else sys.platform

DEFAULT_RUN_DIR = Path("/var/run/babbler" if IS_DARWIN else "/run/babbler")
DEFAULT_STATE_DIR = Path("/var/db/babbler" if IS_DARWIN else "/var/lib/babbler")
SOCKET_NAME = "babblerd.sock"  # the public socket, in the run directory
# Linux: the label of the IPv4 node address on `lo`, the one interface name that holds it
# and nothing else, for programs that bind by interface name (torch's gloo:
# GLOO_SOCKET_IFNAME=lo:babbler; `lo` alone gives them 127.0.0.1). docs/jobs.md.
NODE_ADDRESS_LABEL = "lo:babbler"


def supported() -> bool:
    return IS_LINUX or IS_DARWIN
