"""Moving bytes as fast as one TCP connection takes them, and counting them (blocking
sockets; used by the responder and by `babblerctl bench` alike)."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

from babbler.bench.wire import CHUNK, MAX_LINE

_ZEROS = memoryview(bytes(CHUNK))

Progress = Callable[[int], None]  # told the bytes moved so far, now and then


def send_stream(
    sock: socket.socket, nbytes: int = 0, seconds: float = 0.0, progress: Progress | None = None
) -> int:
    """Send `nbytes` bytes, or for `seconds` when `nbytes` is 0; return the bytes sent."""
    sent = 0
    end = time.monotonic() + seconds
    while True:
        if nbytes:
            if sent >= nbytes:
                break
            size = min(CHUNK, nbytes - sent)
        elif time.monotonic() >= end:
            break
        else:
            size = CHUNK
        sock.sendall(_ZEROS[:size])
        sent += size
        if progress is not None:
            progress(sent)
    return sent


def receive_stream(
    sock: socket.socket, nbytes: int = 0, progress: Progress | None = None
) -> tuple[int, float]:
    """Read `nbytes` bytes, or until the sender closes when 0; return (bytes, seconds from
    the first byte to the last)."""
    buffer = memoryview(bytearray(CHUNK))
    got = 0
    first: float | None = None
    while not nbytes or got < nbytes:
        n = sock.recv_into(buffer, min(CHUNK, nbytes - got) if nbytes else CHUNK)
        if not n:
            break
        if first is None:
            first = time.monotonic()
        got += n
        if progress is not None:
            progress(got)
    return got, (time.monotonic() - first) if first is not None else 0.0


def receive_exactly(sock: socket.socket, buffer: memoryview) -> None:
    """Fill `buffer` from the socket. Raises ConnectionError if the peer closes first."""
    got = 0
    while got < len(buffer):
        n = sock.recv_into(buffer[got:])
        if not n:
            raise ConnectionError("the other end closed mid-message")
        got += n


def read_line(sock: socket.socket, limit: int = MAX_LINE) -> bytes:
    """One line (without its newline), read a byte at a time so that nothing after it is
    taken from the socket. Raises ConnectionError on a close or a line over `limit`."""
    line = bytearray()
    while True:
        byte = sock.recv(1)
        if not byte:
            raise ConnectionError("the other end closed")
        if byte == b"\n":
            return bytes(line)
        line += byte
        if len(line) > limit:
            raise ConnectionError(f"a line longer than {limit} bytes")
