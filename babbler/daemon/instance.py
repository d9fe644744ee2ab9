"""One babblerd per network namespace (per machine on macOS), claimed before anything else.

Linux: an abstract Unix socket belongs to the network namespace it was bound in, so binding
`@babblerd` claims this namespace. The kernel releases it when the process dies however it
dies (also SIGKILL), so there is no stale lock to clean up. A second daemon learns the first
one's pid from the socket's peer credentials.

macOS: an flock on a file in /var/run holds the claim (released by the kernel at exit too);
the file holds the holder's pid.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import struct
from pathlib import Path

from babbler.core.errors import EnvironmentProblem
from babbler.host.system import LINUX_HOST

ABSTRACT_NAME = b"\0babblerd"
LOCK_FILE = Path("/var/run/babblerd.lock")


class Claim:
    """Held for the life of the daemon; `release` gives it up."""

    def __init__(self, handle: socket.socket | int) -> None:
        self._handle = handle

    def release(self) -> None:
        if isinstance(self._handle, socket.socket):
            self._handle.close()
        else:
            os.close(self._handle)


def _holder_pid() -> int | None:
    """The pid of the daemon that holds this namespace's abstract socket, if it answers."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.setblocking(False)
    try:
        probe.connect(ABSTRACT_NAME)
    except OSError:  # BlockingIOError: its backlog is full; the pid is then unknown
        return None
    else:
        creds = probe.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        return int(struct.unpack("3i", creds)[0])
    finally:
        probe.close()


def _claim_namespace() -> Claim:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(ABSTRACT_NAME)
    except OSError:
        sock.close()
        pid = _holder_pid()
        who = f"pid {pid}" if pid else "another process"
        raise EnvironmentProblem(
            f"babblerd already runs in this network namespace ({who}); one per namespace"
        ) from None
    sock.listen(1)  # so that a second daemon can connect and read our pid
    os.set_inheritable(sock.fileno(), False)
    return Claim(sock)


def _claim_machine(path: Path) -> Claim:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        pid = 0
        with contextlib.suppress(OSError, ValueError):
            pid = int(os.pread(fd, 32, 0).strip() or b"0")
        os.close(fd)
        raise EnvironmentProblem(
            f"babblerd already runs on this machine (pid {pid or 'unknown'}, {path})"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return Claim(fd)


def claim() -> Claim:
    """Claim this network namespace (Linux) or machine (elsewhere) for this daemon.
    Raises EnvironmentProblem naming the running daemon."""
    return _claim_namespace() if LINUX_HOST else _claim_machine(LOCK_FILE)
