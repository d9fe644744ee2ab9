"""Reading babeld's control connection in a thread of its own.

babeld writes a burst on every hello and update, about 30 a second on a node of a 10-ring,
nearly all of it byte-identical repeats. Waking the trio loop for each burst cost more than
babeld's own work (a bare trio loop woken 33 times a second: 0.59 % of a core here, a
blocking loop 0.26 %; docs/benchmarks.md). This thread waits in poll(), reads, splits
lines and drops repeats (RepeatFilter), and wakes the trio loop only for a batch that holds
something real: a table change, a status line, the end of the connection.

While nobody watches the table (no `monitor` or `watch` client: `hold(True)`), a
neighbour's `change` line does not wake the trio loop either. babeld measures every
neighbour's rtt on each hello, so these are nearly all the real changes of a quiet mesh
(about 7 a second on a node of a 4-ring at hello 0.1 s), and nothing in the daemon acts on
them: they only show in `status`, `dump` and the node info. The thread keeps the latest
one per neighbour; they go to the loop in front of the next line that is not one of them
(so their order with it is kept), when the daemon reads the table (`take_held`), and when
someone starts watching (`hold(False)`).

While holding, the thread also lets babeld's lines gather for GATHER seconds after each
read (when babeld's send buffer was widened to hold them, sndbuf.py): babeld writes a burst
on every hello on every interface, and one wake-up per burst was most of babblerd's cost
once the trio loop slept through them. Never while a request waits for babeld's answer
(`awaiting`, and `wake` as a request is sent): that answer is read at once.

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
from collections.abc import Callable
from typing import Protocol

import trio

from babbler.core.babeld_lines import RepeatFilter, entry_key
from babbler.core.lines import CHUNK, TOO_LONG, LineSplitter

END = None  # a batch that says the connection ended (closed, reset)
HELD = b"change neighbour "  # what may wait while nobody watches (module docstring)
# While nobody watches: the longest babeld's lines wait in the socket between reads. At
# hello 0.1 s a node's babeld writes ~27 bursts a second on 2 interfaces; this reads them
# at most 10 times a second. The widened buffer holds ~1 s of a 64-ring's stream, 10 times
# this; a `status` may miss what babeld said in the last GATHER seconds.
GATHER = 0.1


class LineCounter(Protocol):
    """What the thread counts (control.LineCounts: written by the thread alone, read by
    `stats` now and then)."""

    lines_in: int
    repeats: int
    held: int


class ThreadedReader:
    def __init__(
        self,
        sock: trio.socket.SocketType,
        splitter: LineSplitter,
        counts: LineCounter,
        hold: bool = False,
        gather: float = 0.0,
        awaiting: Callable[[], bool] = lambda: False,
    ) -> None:
        """`hold`: nobody watches yet. `gather`: GATHER where babeld's send buffer was
        widened, else 0 (its default buffer fills in ~250 lines; babeld then cuts us).
        `awaiting`: a request waits for its answer."""
        self._fd = os.dup(sock.fileno())
        self._splitter = splitter
        self._counts = counts
        self._filter = RepeatFilter()
        self._token = trio.lowlevel.current_trio_token()
        self._batches: collections.deque[list[bytes] | None] = collections.deque()
        self._lock = threading.Lock()
        self._fd_closed = False
        self._hold = hold
        self._held: dict[bytes, bytes] = {}  # entry key -> its latest held line
        self._gather = gather
        self._awaiting = awaiting
        self._resume = threading.Event()  # set: read as soon as babeld writes
        if not hold:
            self._resume.set()
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

    def hold(self, on: bool) -> None:
        """Hold neighbour changes (nobody watches) or not; lines held so far go to the
        loop as a batch of their own when holding ends."""
        with self._lock:
            self._hold = on
            if on:
                self._resume.clear()
                return
            self._resume.set()
            if self._held:
                self._append(list(self._held.values()))
                self._held.clear()

    def begin_census(self) -> None:
        """A request for babeld's whole table is about to be sent (protocol.RepeatFilter)."""
        with self._lock:
            self._filter.begin_census()

    def end_census(self, complete: bool) -> list[bytes]:
        """Its answer came: `flush` lines for the entries it did not name (and their held
        changes dropped: they must not bring a gone neighbour back). Nothing when the table
        did not come whole (`complete` False: refused, or the connection ended)."""
        with self._lock:
            flushes = self._filter.end_census(complete)
            for line in flushes:
                self._held.pop(entry_key(line.removeprefix(b"flush ")), None)
            return flushes

    def wake(self) -> None:
        """A request was sent: stop letting lines gather, read its answer as it comes."""
        self._resume.set()

    def take_held(self) -> list[bytes]:
        """The held lines, for the loop to apply now (it is about to read the table).
        Nothing while a batch waits: the held lines are newer than it and must come after it,
        so they stay, as fresh as lines still in the socket."""
        with self._lock:
            if self._batches or not self._held:
                return []
            held = list(self._held.values())
            self._held.clear()
            return held

    def stop(self) -> None:
        """End the thread: the poll returns at once with the reading side shut down. Under
        the lock, so that a descriptor the thread has closed (its number perhaps reused by
        then) is never touched."""
        with self._lock:
            self._resume.set()
            if self._fd_closed:
                return
            with contextlib.suppress(OSError), socket.socket(fileno=os.dup(self._fd)) as sock:
                sock.shutdown(socket.SHUT_RD)

    def _offer(self, lines: list[bytes]) -> None:
        """Filter a chunk's lines; hand what is real to trio."""
        with self._lock:  # a census may begin or end meanwhile (the trio thread)
            real = [line for line in lines if line is TOO_LONG or not self._filter.is_repeat(line)]
            self._counts.lines_in += len(lines)
            self._counts.repeats += len(lines) - len(real)
            if not real:
                return
            if self._hold and all(line.startswith(HELD) for line in real):
                for line in real:
                    self._held[entry_key(line.removeprefix(b"change "))] = line
                self._counts.held += len(real)
                return
            if self._held:
                real[:0] = self._held.values()
                self._held.clear()
            self._append(real)

    def _append(self, batch: list[bytes] | None) -> None:
        """Under the lock, so that batches keep the order their lines came in."""
        self._batches.append(batch)
        with contextlib.suppress(trio.RunFinishedError):
            self._token.run_sync_soon(self._arrived.set)

    def _drain(self) -> bool:
        """Read all that babeld has written; False once the connection ended."""
        while True:
            try:
                data = os.read(self._fd, CHUNK)
            except BlockingIOError:
                return True
            except OSError:  # a reset: as good as a close
                return False
            if not data:
                return False
            lines = self._splitter.feed(data)
            if lines:
                self._offer(lines)
            if len(data) < CHUNK:
                return True

    def _run(self) -> None:
        poller = select.poll()
        poller.register(self._fd, select.POLLIN)
        try:
            while True:
                poller.poll()
                if not self._drain():
                    return
                if self._gather and not self._awaiting():
                    self._resume.wait(self._gather)
                    with self._lock:
                        if self._hold:
                            self._resume.clear()
        finally:
            with self._lock:
                os.close(self._fd)
                self._fd_closed = True
                self._append(END)
