"""Whether this process may do the daemon's job: root, or the two network capabilities.

The systemd unit runs babblerd as the unprivileged `babbler` user with CAP_NET_ADMIN (addresses,
routes) and CAP_NET_RAW (babeld binds its sockets to devices) as ambient capabilities, which
babeld inherits. Anything less fails later, less clearly, so the CLI checks up front.
"""

from __future__ import annotations

import os
from pathlib import Path

from babbler.host.system import LINUX_HOST

CAP_NET_ADMIN = 12
CAP_NET_RAW = 13
NEEDED = {"CAP_NET_ADMIN": CAP_NET_ADMIN, "CAP_NET_RAW": CAP_NET_RAW}


def effective_caps(status_text: str) -> int:
    """The CapEff mask from the text of /proc/PID/status (0 when absent)."""
    for line in status_text.splitlines():
        if line.startswith("CapEff:"):
            return int(line.split(":", 1)[1].strip(), 16)
    return 0


def missing_caps(mask: int) -> list[str]:
    """Names of the needed capabilities that `mask` lacks."""
    return [name for name, bit in NEEDED.items() if not mask >> bit & 1]


def privilege_problem() -> str | None:
    """Why this process cannot run the daemon, or None when it can."""
    if os.geteuid() == 0:
        return None
    if not LINUX_HOST:  # capabilities are Linux's; elsewhere it is root or nothing
        return "must run as root: it adds addresses and runs babeld"
    try:
        mask = effective_caps(Path("/proc/self/status").read_text())
    except OSError:
        mask = 0
    missing = missing_caps(mask)
    if not missing:
        return None
    return (
        "must run as root or with CAP_NET_ADMIN and CAP_NET_RAW "
        f"(missing {', '.join(missing)}): it adds addresses and runs babeld"
    )
