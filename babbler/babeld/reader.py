"""Reading babeld's control connection in a thread of its own.

babeld writes a burst on every hello and update, about 30 a second on a node of a 10-ring,
nearly all of it byte-identical repeats. Waking the trio loop for each burst cost more than
babeld's own work (a bare trio loop woken 33 times a second: 0.59 % of a core here, a
blocking loop 0.26 %; docs/benchmarks.md). This thread waits in poll(), reads, splits
lines and drops repeats (RepeatFilter), and wakes the trio loop only for a batch that holds
something real: a table change, a status line, the end of the connection.

The thread owns a duplicate of the socket's descriptor (trio's stays non-blocking and keeps
writing requests); `stop` shuts the connection's reading side down, which ends the poll.
"""

from __future__ import annotations

import collections
import contextlib
import os
import select
import socket
import threading
from typing import Protocol

import trio

from babbler.babeld.protocol import RepeatFilter
from babbler.lines import CHUNK, TOO_LONG, LineSplitter

END = None  # a batch that says the connection ended (closed, reset)


class LineCounter(Protocol):
    """What the thread counts (control.LineCounts: written by the thread alone, read by
    `stats` now and then)."""

    lines_in: int
    repeats: int


class ThreadedReader:
    def __init__(
        self, sock: trio.socket.SocketType, splitter: LineSplitter, counts: LineCounter
    ) -> None:
        self._fd = os.dup(sock.fileno())
        self._splitter = splitter
        self._counts = counts
        self._filter = RepeatFilter()
        self._token = trio.lowlevel.current_trio_token()
        self._batches: collections.deque[list[bytes] | None] = collections.deque()
        self._lock = threading.Lock()
        self._fd_closed = False
        self._arrived = trio.Event()
        self._thread = threading.Thread(target=self._run, name="babeld-reader", daemon=True)

    def start(self, first: list[bytes]) -> None:
        """Start reading; `first`: lines already read off the socket (after the greeting)."""
        if first:
            self._offer(first)
        self._thread.start()

    async def batch(self) -> list[bytes] | None:
        """The next lines that are not repeats (at least one; TOO_LONG passes), or None once
        the connection ended."""
        while True:
            with self._lock:
                if self._batches:
                    return self._batches.popleft()
                self._arrived = trio.Event()
            await self._arrived.wait()

    def stop(self) -> None:
        """End the thread: the poll returns at once with the reading side shut down. Under
        the lock, so that a descriptor the thread has closed (its number perhaps reused by
        then) is never touched."""
        with self._lock:
            if self._fd_closed:
                return
            with contextlib.suppress(OSError), socket.socket(fileno=os.dup(self._fd)) as sock:
                sock.shutdown(socket.SHUT_RD)

    def _offer(self, lines: list[bytes]) -> None:
        """Filter a chunk's lines; hand what is real to trio."""
        real = [line for line in lines if line is TOO_LONG or not self._filter.is_repeat(line)]
        self._counts.lines_in += len(lines)
        self._counts.repeats += len(lines) - len(real)
        if real:
            self._push(real)

    def _push(self, batch: list[bytes] | None) -> None:
        with self._lock:
            self._batches.append(batch)
            arrived = self._arrived
        with contextlib.suppress(trio.RunFinishedError):
            self._token.run_sync_soon(arrived.set)

    def _run(self) -> None:
        poller = select.poll()
        poller.register(self._fd, select.POLLIN)
        try:
            while True:
                poller.poll()
                try:
                    data = os.read(self._fd, CHUNK)
                except BlockingIOError:
                    continue
                except OSError:  # a reset: as good as a close
                    data = b""
                if not data:
                    return
                lines = self._splitter.feed(data)
                if lines:
                    self._offer(lines)
        finally:
            with self._lock:
                os.close(self._fd)
                self._fd_closed = True
            self._push(END)
