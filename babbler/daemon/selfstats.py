"""What the daemon process itself holds: trio tasks, open file descriptors, resident memory.

Served by the `stats` request, so that leaks show from outside (the churn and hostile-client
tests read it before and after) and an operator can look at a long-running daemon.
"""

from __future__ import annotations

import os
import resource
from pathlib import Path
from typing import Any

import trio

from babbler.host.system import LINUX_HOST


def count_tasks() -> int:
    """Every live trio task in this run, counted from the root task down."""
    count = 0
    root = trio.lowlevel.current_root_task()
    stack = [root] if root is not None else []
    while stack:
        task = stack.pop()
        count += 1
        for nursery in task.child_nurseries:
            stack.extend(nursery.child_tasks)
    return count


def open_fds() -> int:
    for directory in ("/proc/self/fd", "/dev/fd"):
        try:
            return len(os.listdir(directory)) - 1  # the listing's own descriptor
        except OSError:
            continue
    return -1


def rss_bytes() -> int:
    """Resident memory now (Linux), else the peak (getrusage; bytes on macOS)."""
    if LINUX_HOST:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE")
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def process_stats(clients: int) -> dict[str, Any]:
    return {
        "pid": os.getpid(),
        "tasks": count_tasks(),
        "open_fds": open_fds(),
        "rss_bytes": rss_bytes(),
        "clients": clients,
    }
