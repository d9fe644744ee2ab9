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
CABLE_LABEL = ":m"  # the tail of a cable address's label (cable_address_label)
IFNAMSIZ = 16  # Linux's limit on interface names and labels, the terminating NUL included


def cable_address_label(interface: str) -> str:
    """Linux: the label of a cable's IPv4 address on its link, never the link's own name.
    babeld reads a link's IPv4 address with SIOCGIFADDR, which takes the first address
    labelled with the link's name, and when that changes it flushes every route it learned
    over the link, IPv6 too. A cable address comes after the neighbour, so each one made
    such a flush as the mesh formed; the seqno requests that followed left babeld's
    forwarded-request records behind, which swallow the same request for 65 s
    (REQUEST_TIMEOUT): after a node died, the nodes beside it reached the far side of the
    ring only 64 s later in 1 of 5 runs (docs/benchmarks.md). Unlabelled for babeld, it
    announces IPv4 routes via IPv6 next hops (v4-via-v6), as it did before the address."""
    return f"{interface[: IFNAMSIZ - 1 - len(CABLE_LABEL)]}{CABLE_LABEL}"


def supported() -> bool:
    return IS_LINUX or IS_DARWIN
