"""babblerctl's connection: it waits while the daemon's accept queue is full (a Unix socket
with a timeout would otherwise fail at once with EAGAIN), up to its timeout."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest

from babbler.client import Connection, NotRunning


def full_listener(path: Path) -> tuple[socket.socket, list[socket.socket]]:
    """A listener whose backlog is full: nobody accepts, two connections already wait."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(0)
    queued = []
    for _ in range(4):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            sock.connect(str(path))
        except BlockingIOError:
            sock.close()
            break
        queued.append(sock)
    return server, queued


def test_a_full_accept_queue_is_waited_out(tmp_path: Path) -> None:
    path = tmp_path / "s"
    server, queued = full_listener(path)
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.setblocking(False)
    with pytest.raises(BlockingIOError):  # the queue is full: a connect now has to wait
        probe.connect(str(path))
    probe.close()
    accepting = threading.Event()

    def accept_later() -> None:
        time.sleep(0.3)
        accepting.set()
        for _ in range(len(queued) + 1):
            conn, _ = server.accept()
            conn.sendall(b"BABEL 1.0\nok\n")
            conn.close()

    helper = threading.Thread(target=accept_later)
    helper.start()
    try:
        with Connection(path, timeout=10) as conn:
            assert accepting.is_set(), "connected before anyone accepted: nothing was waited out"
            assert conn.header == ["BABEL 1.0"]
    finally:
        helper.join()
        for sock in [*queued, server]:
            sock.close()


def test_a_queue_that_stays_full_ends_in_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "s"
    server, queued = full_listener(path)
    try:
        with pytest.raises(NotRunning, match=r"did not accept within 0\.3 s"):
            Connection(path, timeout=0.3)
    finally:
        for sock in [*queued, server]:
            sock.close()
