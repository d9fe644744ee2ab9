"""A stand-in for babblerd's public socket (docs/protocol.md) for babblerctl's unit tests: a
Unix socket that greets, then answers each request line with what the test put in its dict,
as many requests a connection as the client sends, each connection in a thread of its own.

An answer is a JSON value (sent as its JSON), a `str` (sent as the line it is, so a test can
send what is not JSON), or a callable giving either, called at each request. A request with
no answer, or None, is answered as babblerd answers a request it does not know: `bad ...`.
What it cannot show: babblerd's streams (`watch`), its limits and its slowness."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest

GREETING = b"BABEL 1.0\nok\n"
JOIN_WAIT = 5.0  # seconds to wait for the fake's threads at the end of a test


def answer_line(answers: dict[str, Any], request: str) -> bytes:
    """The lines babblerd would send for `request`, from the test's `answers`."""
    answer = answers.get(request)
    if callable(answer):
        answer = answer()
    if answer is None:
        return f"bad unknown request {request!r}, try help\n".encode()
    line = answer if isinstance(answer, str) else json.dumps(answer)
    return f"{line}\nok\n".encode()


@contextmanager
def serving(path: Path) -> Iterator[dict[str, Any]]:
    """Serve babblerd's socket at `path` until the block ends; yields the answers dict, request
    -> answer, that the test fills (and may change between requests)."""
    answers: dict[str, Any] = {}
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen()
    conns: list[socket.socket] = []
    threads: list[threading.Thread] = []

    def converse(conn: socket.socket) -> None:
        # OSError: the client hung up, or the test ended
        with conn, conn.makefile("rwb") as file, suppress(OSError):
            file.write(GREETING)
            file.flush()
            for line in file:
                file.write(answer_line(answers, line.decode().strip()))
                file.flush()

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:  # the listener was shut at the end of the test
                return
            conns.append(conn)
            threads.append(threading.Thread(target=converse, args=(conn,), daemon=True))
            threads[-1].start()

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        yield answers
    finally:
        listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        acceptor.join(JOIN_WAIT)
        for conn in conns:
            with suppress(OSError):  # already closed by its thread
                conn.shutdown(socket.SHUT_RDWR)
        for thread in threads:
            thread.join(JOIN_WAIT)


@pytest.fixture
def fake_babblerd(tmp_path: Path) -> Iterator[tuple[Path, dict[str, Any]]]:
    """babblerd's socket at tmp_path/babblerd.sock, and the answers dict the test fills."""
    path = tmp_path / "babblerd.sock"
    with serving(path) as answers:
        yield path, answers
