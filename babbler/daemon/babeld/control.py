"""A connection to babeld's read-write control socket (`-G`).

One connection carries everything, and a reader (reader.py, a thread) runs for the life of
the connection, so babeld never waits on us (it drops a client that does not read for
100 ms): `monitor` is sent first; while nobody watches, the mesh supervisor may switch to a
`dump` a second (core/readpolicy.py). Requests are answered in order, so each status line
(`ok`/`no`/`bad`) completes the oldest pending request; table lines go to the `on_line`
callback as they come.
"""

from __future__ import annotations

import collections
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import structlog
import trio

from babbler.core.babeld_lines import (
    GreetingLine,
    MalformedLine,
    StatusLine,
    TableLine,
    parse_line,
)
from babbler.core.errors import BabeldError
from babbler.core.lines import TOO_LONG
from babbler.daemon.babeld.reader import ThreadedReader
from babbler.daemon.linereader import LineReader

log = structlog.get_logger("babbler.babeld")

# babeld answers in well under a millisecond; a request unanswered this long means it hung.
REQUEST_DEADLINE = 5.0
# babeld's socket appears ~0.15 s after spawn; poll for it this often.
CONNECT_POLL = 0.02
MAX_LINE = 4096


@dataclass
class Greeting:
    version: str = ""
    host: str = ""
    my_id: str = ""


@dataclass
class _Pending:
    request: str
    done: trio.Event = field(default_factory=trio.Event)
    reply: StatusLine | None = None


def refused(request: str, reply: StatusLine) -> BabeldError:
    """The error for a request babeld answered with `no` or `bad`."""
    return BabeldError(f"babeld refused {request}: {reply.status} {reply.message}")


class ControlCut(BabeldError):
    """babeld closed the control connection. It does so while staying up when a write to
    us has waited 100 ms (local.c write_timeout: a slow reader), so this is not a death."""


@dataclass
class LineCounts:
    """Lines read from babeld after its greeting, how many were dropped as repeats and
    how many neighbour changes were held while nobody watched (reader.py); kept across
    sessions by whoever passes the same object to every `connect`."""

    lines_in: int = 0
    repeats: int = 0
    held: int = 0


class BabeldControl:
    def __init__(
        self,
        stream: trio.SocketStream,
        counts: LineCounts | None = None,
        request_deadline: float = REQUEST_DEADLINE,
    ) -> None:
        self._stream = stream
        self.request_deadline = request_deadline
        self._reader = LineReader(stream, MAX_LINE)  # the greeting; then reader.py
        self._pending: collections.deque[_Pending] = collections.deque()
        self._send_lock = trio.Lock()
        self.greeting = Greeting()
        self.closed = False
        self.counts = counts or LineCounts()
        self.cut = False  # babeld ended the connection (it does when a reader is slow)
        self._hold = False
        self.gather = 0.0  # reader.GATHER once babeld's send buffer is widened
        self._threaded: ThreadedReader | None = None
        self._on_line: Callable[[TableLine], None] = lambda line: None

    async def _next_line(self) -> str:
        try:
            raw = await self._reader.readline()
        except trio.BrokenResourceError as error:  # reset: babeld died meanwhile
            raise BabeldError(f"babeld's control connection broke: {error}") from None
        if raw is None:
            raise BabeldError("babeld closed its control connection")
        if raw is TOO_LONG:
            raise BabeldError("babeld sent an over-long line")
        return raw.decode("utf-8", "replace")

    async def read_greeting(self) -> Greeting:
        """Read `BABEL 1.0`, version, host, my-id up to `ok`. Raises BabeldError."""
        while True:
            text = await self._next_line()
            try:
                line = parse_line(text)
            except MalformedLine as error:
                raise BabeldError(f"bad greeting from babeld: {error}") from None
            if isinstance(line, StatusLine):
                if not line.ok:
                    raise BabeldError(f"babeld refused the connection: {text}")
                return self.greeting
            if isinstance(line, GreetingLine):
                if line.key == "version":
                    self.greeting.version = line.value
                elif line.key == "host":
                    self.greeting.host = line.value
                elif line.key == "my-id":
                    self.greeting.my_id = line.value

    async def read_forever(self, on_line: Callable[[TableLine], None]) -> None:
        """Read until babeld closes: table lines to `on_line`, status lines to requests.
        Raises BabeldError when the connection ends or babeld speaks out of turn. Reading
        happens in a thread (reader.py), which drops a line identical to the last one for
        the same entry before the trio loop is even woken."""
        reader = ThreadedReader(
            self._stream.socket,
            self._reader.splitter,
            self.counts,
            hold=self._hold,
            gather=self.gather,
            awaiting=lambda: bool(self._pending),
        )
        self._threaded, self._on_line = reader, on_line
        reader.start(list(self._reader.ready))  # what came with the greeting's last read
        self._reader.ready.clear()
        try:
            while True:
                batch = await reader.batch()
                if batch is None:
                    self.cut = True
                    raise ControlCut("babeld closed its control connection")
                for raw in batch:
                    if raw is TOO_LONG:
                        raise BabeldError("babeld sent an over-long line")
                    self._take(raw.decode("utf-8", "replace"), on_line)
        finally:
            reader.stop()
            self._threaded = None
            self.closed = True
            for pending in self._pending:
                pending.done.set()

    def hold(self, on: bool) -> None:
        """Hold neighbour changes in the reader while nobody watches the table, or stop
        (reader.py); also for a reader not started yet."""
        self._hold = on
        if self._threaded is not None:
            self._threaded.hold(on)

    def catch_up(self) -> None:
        """Apply the held neighbour changes now: the table is about to be read."""
        if self._threaded is not None:
            for raw in self._threaded.take_held():
                self._take(raw.decode("utf-8", "replace"), self._on_line)

    def _take(self, text: str, on_line: Callable[[TableLine], None]) -> None:
        try:
            line = parse_line(text)
        except MalformedLine as error:
            log.warning("unparsed babeld line", error=str(error))
            return
        if isinstance(line, TableLine):
            on_line(line)
        elif isinstance(line, StatusLine):
            if not self._pending:
                raise BabeldError(f"babeld answered a request nobody sent: {text}")
            pending = self._pending.popleft()
            pending.reply = line
            pending.done.set()

    async def request(self, text: str, deadline: float | None = None) -> StatusLine:
        """Send one request line and wait for its status line.
        Raises BabeldError when babeld does not answer within `deadline` (default: the
        connection's `request_deadline`) or goes away."""
        deadline = self.request_deadline if deadline is None else deadline
        if self.closed:
            raise BabeldError("babeld control connection is closed")
        pending = _Pending(text)
        async with self._send_lock:
            self._pending.append(pending)
            try:
                await self._stream.send_all(f"{text}\n".encode())
                if self._threaded is not None:
                    self._threaded.wake()
            except (trio.BrokenResourceError, trio.ClosedResourceError) as error:
                raise BabeldError(f"babeld control connection broke: {error}") from None
        with trio.move_on_after(deadline):
            await pending.done.wait()
        if pending.reply is None:
            if self.closed:
                raise BabeldError(f"babeld went away before answering {text!r}")
            raise BabeldError(f"babeld did not answer {text!r} within {deadline:g} s")
        return pending.reply

    async def require(self, text: str) -> None:
        """A request babblerd cannot go on without (`monitor`, `unmonitor`): raises
        BabeldError when babeld refuses it."""
        reply = await self.request(text)
        if not reply.ok:
            raise refused(text, reply)

    async def read_table(self, request: str) -> StatusLine:
        """`dump` or `monitor`: babeld's whole table again, on this connection. Its entries
        that did not change are dropped at the door like any repeat; entries it no longer
        has are flushed from the table once its answer came."""
        reader = self._threaded
        if reader is not None:
            reader.begin_census()
        complete = False
        try:
            reply = await self.request(request)
            complete = reply.ok
        finally:
            flushes = reader.end_census(complete) if reader is not None else []
        for raw in flushes:
            self._take(raw.decode("utf-8", "replace"), self._on_line)
        return reply

    async def aclose(self) -> None:
        await self._stream.aclose()


async def connect(
    path: Path, counts: LineCounts | None = None, request_deadline: float = REQUEST_DEADLINE
) -> BabeldControl:
    """Connect to babeld's socket as soon as it exists and read its greeting.
    Callers bound this with a deadline (babeld may never create it)."""
    while True:
        sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            await sock.connect(str(path))
        except (FileNotFoundError, ConnectionRefusedError):
            sock.close()
            await trio.sleep(CONNECT_POLL)
            continue
        except BaseException:
            sock.close()
            raise
        control = BabeldControl(trio.SocketStream(sock), counts, request_deadline)
        try:
            await control.read_greeting()
        except BaseException:
            await control.aclose()
            raise
        return control
