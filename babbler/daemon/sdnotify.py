"""systemd's notify protocol: one datagram to $NOTIFY_SOCKET, nothing when it is unset."""

from __future__ import annotations

import os
import socket


def notify(message: str) -> bool:
    """Send e.g. "READY=1". Returns whether a notify socket was there to send to."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return False
    if address.startswith("@"):
        address = "\0" + address[1:]  # abstract namespace
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
        try:
            sock.connect(address)
            sock.sendall(message.encode())
        except OSError:
            return False
    return True
