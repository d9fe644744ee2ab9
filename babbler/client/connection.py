"""One blocking connection to babblerd's socket: connect, read the header, send requests,
read answers and streams. The building block of `Client`; babblerctl, the lab and the tests
also use it for raw lines."""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import time
from collections.abc import Iterator
from pathlib import Path

from babbler.client.answer import ends, streamed
from babbler.client.errors import AccessDenied, Disconnected, NotRunning, ProtocolError
from babbler.core.platform import DEFAULT

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


# How to start it, said where its absence is (docs/operations.md installs the services).
START = DEFAULT.start_hint


def connect_error(error: OSError, path: Path, timeout: float | None) -> Exception:
    """The client error for a failed connect() (shared with the async client)."""
    if isinstance(error, FileNotFoundError):
        return NotRunning(f"babblerd is not running (no socket at {path}); {START}")
    if isinstance(error, ConnectionRefusedError):
        return NotRunning(f"babblerd is not running (nothing answers at {path}); {START}")
    if isinstance(error, PermissionError):
        return AccessDenied(f"permission denied on {path}")
    if isinstance(error, TimeoutError):
        return NotRunning(f"babblerd did not accept within {timeout:g} s ({path})")
    return NotRunning(f"cannot connect to {path}: {error.strerror or error}")


class Connection:
    """A connection whose header has been read (`header`: its lines before `ok`).
    `timeout` bounds the connect and every read; None waits for ever (a stream)."""

    def __init__(self, path: str | os.PathLike[str], timeout: float | None = 10.0) -> None:
        self.path = Path(path)
        problem = path_problem(self.path)
        if problem:
            raise NotRunning(problem)
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(timeout)
        try:
            self._connect(timeout)
        except OSError as error:
            self._sock.close()
            raise connect_error(error, self.path, timeout) from None
        self._file = self._sock.makefile("r", encoding="utf-8", newline="\n")
        try:
            self.header = self._read_answer()
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

    def settimeout(self, timeout: float | None) -> None:
        """The bound on each read from here on; None for a stream that may be quiet."""
        self._sock.settimeout(timeout)

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
        """The next line. Raises Disconnected at the end of the stream, ProtocolError for
        bytes that are not UTF-8, TimeoutError when the timeout passes."""
        try:
            line = self._file.readline()
        except UnicodeDecodeError:
            raise ProtocolError(f"babblerd sent a line that is not UTF-8 ({self.path})") from None
        except (ConnectionResetError, BrokenPipeError):
            line = ""
        if not line.endswith("\n"):
            raise Disconnected.at(self.path)
        return line[:-1]

    def _read_answer(self) -> list[str]:
        lines: list[str] = []
        while not ends(line := self.readline()):
            lines.append(line)
        return lines

    def send(self, request: str) -> None:
        try:
            self._sock.sendall(f"{request}\n".encode())
        except (BrokenPipeError, ConnectionResetError):
            raise Disconnected.at(self.path) from None

    def request(self, request: str) -> list[str]:
        """Send a request; return its data lines. Raises Refused, ProtocolError, Disconnected."""
        self.send(request)
        return self._read_answer()

    def lines(self) -> Iterator[str]:
        """Every line from here on, `ok` included (a stream: `monitor`, `watch`); it ends
        with Disconnected, or with Refused, TooSlow or ProtocolError for `no`/`bad`."""
        while True:
            yield streamed(self.readline())
