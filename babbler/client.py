"""A small synchronous client of the public socket, for babblerctl, the lab and tests."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from babbler.errors import BabblerError

HEADER_END = "ok"


class NotRunning(BabblerError):
    """Nothing serves the socket."""


# sockaddr_un's path field: 108 bytes with the terminating NUL.
MAX_SOCKET_PATH = 107


def path_problem(path: Path | str) -> str | None:
    """What makes `path` unusable as babblerd's socket, in words, or None."""
    path = Path(path)
    if len(os.fsencode(path)) > MAX_SOCKET_PATH:
        return f"socket path too long ({len(os.fsencode(path))} bytes, at most 107): {path}"
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return None
    except OSError as error:
        return f"cannot use {path}: {error.strerror or error}"
    if stat.S_ISSOCK(mode):
        return None
    what = (
        "a directory"
        if stat.S_ISDIR(mode)
        else "a regular file"
        if stat.S_ISREG(mode)
        else "not a socket"
    )
    return f"{path} is {what}, not babblerd's socket (--socket or BABBLER_SOCKET names it)"


class Connection:
    def __init__(self, path: Path, timeout: float | None = 10.0) -> None:
        self.path = path
        problem = path_problem(path)
        if problem:
            raise NotRunning(problem)
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(timeout)
        try:
            self._connect(timeout)
        except FileNotFoundError:
            self._sock.close()
            raise NotRunning(f"babblerd is not running (no socket at {path})") from None
        except ConnectionRefusedError:
            self._sock.close()
            raise NotRunning(f"babblerd is not running (nothing answers at {path})") from None
        except PermissionError:
            self._sock.close()
            raise NotRunning(f"permission denied on {path}") from None
        except TimeoutError:
            self._sock.close()
            raise NotRunning(f"babblerd did not accept within {timeout:g} s ({path})") from None
        self._file = self._sock.makefile("r", encoding="utf-8", newline="\n")
        try:
            self.header = self._read_until_status()
        except BaseException:  # refused ("no too many clients") or gone: nothing leaks
            self.close()
            raise

    def _connect(self, timeout: float | None) -> None:
        """connect(), waiting while the daemon's accept queue is full. A Unix socket with a
        timeout does not wait there: it fails at once with EAGAIN, so wait here instead."""
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = 0.001
        while True:
            try:
                self._sock.connect(str(self.path))
                return
            except BlockingIOError:
                if deadline is not None and time.monotonic() >= deadline:
                    raise TimeoutError from None
                time.sleep(pause)
                pause = min(pause * 2, 0.05)

    def close(self) -> None:
        self._file.close()
        self._sock.close()

    def hang_up(self) -> None:
        """End the connection from another thread: a reader blocked in readline() gets EOF
        (closing alone would wait for that reader's buffer lock)."""
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def readline(self) -> str:
        line = self._file.readline()
        if not line:
            raise BabblerError(f"babblerd closed the connection ({self.path})")
        return line.rstrip("\n")

    def _read_until_status(self) -> list[str]:
        lines: list[str] = []
        while True:
            line = self.readline()
            if line == "ok" or line.startswith(("no", "bad")):
                if line != "ok":
                    raise BabblerError(f"babblerd said: {line}")
                return lines
            lines.append(line)

    def send(self, request: str) -> None:
        self._sock.sendall(f"{request}\n".encode())

    def request(self, request: str) -> list[str]:
        """Send a request; return its data lines (raises on `no`/`bad`)."""
        self.send(request)
        return self._read_until_status()

    def lines(self) -> Iterator[str]:
        while True:
            yield self.readline()


def ask(path: Path, request: str, timeout: float = 10.0) -> Any:
    """One request whose answer is one JSON line (`status`, `stats`), parsed."""
    with Connection(path, timeout) as conn:
        lines = conn.request(request)
    return json.loads(lines[0])


def status(path: Path, timeout: float = 10.0) -> dict[str, Any]:
    value: dict[str, Any] = ask(path, "status", timeout)
    return value
