"""Give babeld's end of our control connection a larger send buffer (Linux).

babeld writes every `monitor` line with its own write(); on a Unix stream socket each write
is one buffer charged to babeld's send buffer (212,992 bytes by default) at its true size,
about 1 KB for a 200-byte line, so only ~250 lines fit. When a write finds the buffer full
babeld waits 100 ms (local.c write_timeout), blocking its whole event loop, and then shuts
the connection down. On a node of a 64-node ring babeld writes ~3,600 lines a second: 70 ms
without a read, which a loaded machine easily causes, cost babeld a hello and us the
connection, and the resulting churn spread (measured: a 64-node lab on 2 cores never settled).

babeld has no setting for it, so babblerd, its parent and root, takes a copy of babeld's
socket descriptor (pidfd_getfd, Linux 5.6+) and sets SO_SNDBUFFORCE on it. babeld's only
connected stream Unix socket is ours (nothing else connects to its private socket).
Best effort: where it is not possible nothing changes but the margin.
"""

from __future__ import annotations

import ctypes
import os
import socket

from babbler.host.system import LINUX_HOST

# About 4,000 lines, a second of a 64-node ring's monitor stream; used only while behind.
CONTROL_SNDBUF = 4 << 20
SO_SNDBUFFORCE = 32
SYS_PIDFD_OPEN = 434
SYS_PIDFD_GETFD = 438


def widen(pid: int, size: int = CONTROL_SNDBUF) -> int:
    """Set the send buffer of babeld's connected stream Unix sockets to `size`; return how
    many were set. Raises OSError when babeld's descriptors cannot be reached."""
    if not LINUX_HOST:
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    pidfd = libc.syscall(SYS_PIDFD_OPEN, pid, 0)
    if pidfd < 0:
        raise OSError(ctypes.get_errno(), f"pidfd_open({pid}): {os.strerror(ctypes.get_errno())}")
    widened = 0
    try:
        for name in os.listdir(f"/proc/{pid}/fd"):
            try:
                if not os.readlink(f"/proc/{pid}/fd/{name}").startswith("socket:"):
                    continue
            except FileNotFoundError:
                continue  # closed meanwhile
            fd = libc.syscall(SYS_PIDFD_GETFD, pidfd, int(name), 0)
            if fd < 0:
                error = ctypes.get_errno()
                raise OSError(error, f"pidfd_getfd: {os.strerror(error)}")
            with socket.socket(fileno=fd) as sock:  # our copy; babeld's stays open
                stream = sock.family == socket.AF_UNIX and sock.type == socket.SOCK_STREAM
                if stream and not sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
                    sock.setsockopt(socket.SOL_SOCKET, SO_SNDBUFFORCE, size)
                    widened += 1
    finally:
        os.close(pidfd)
    return widened
