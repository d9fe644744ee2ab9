"""A babeld left behind: its pid file and socket cleared before the next start (babeld exits
on either), and a live stale babeld stopped first. Forking and waiting for babeld are
daemon/spawn.py's and daemon/children.py's, as for every child of babblerd.

On macOS (no death signal) a babeld left by a killed babblerd is stopped here, through its
pid file, at the next start (launchd restarts at once).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import structlog

from babbler.daemon.children import stop_stale
from babbler.daemon.spawn import process_name

log = structlog.get_logger("babbler.babeld")


def _read_pid(pid_file: Path) -> int:
    """The pid in babeld's pid file; 0 when absent, unreadable, or a symlink (never followed:
    a planted link must not make us signal whatever process it names)."""
    try:
        fd = os.open(pid_file, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return 0
    try:
        with os.fdopen(fd) as file:
            return int(file.read(32).strip())
    except (OSError, ValueError):
        return 0


def _remove(*paths: Path) -> None:
    """Remove files without following symlinks; absent ones are fine."""
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


async def clear_stale(pid_file: Path, control_socket: Path) -> int | None:
    """Stop a babeld left running by an earlier daemon (its pid file names a live babeld),
    then remove the pid file and socket babeld would refuse to start with.
    Returns the pid that was stopped, if any."""
    pid = _read_pid(pid_file)

    def say() -> None:
        log.warning("stopping stale babeld", pid=pid, pid_file=str(pid_file))

    def ours() -> bool:
        return process_name(pid) == "babeld"

    stopped = pid if pid > 0 and await stop_stale(pid, ours, say) else None
    _remove(pid_file, control_socket)
    return stopped
