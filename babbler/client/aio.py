"""The async client, for asyncio and trio programs alike (anyio): `AsyncClient`, the same
calls as the blocking `Client`, awaited."""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator
from pathlib import Path

import anyio
from anyio.abc import SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream

from babbler.client.answer import MAX_LINE, ends, streamed
from babbler.client.backoff import Reconnecting
from babbler.client.connection import connect_error, path_problem
from babbler.client.errors import Disconnected, NotRunning, ProtocolError
from babbler.client.model import (
    Counters,
    Event,
    Node,
    NodeEvent,
    Status,
    parse_counters,
    parse_event,
    parse_status,
)
from babbler.client.sync import RETRIED, default_socket, one_json
from babbler.client.tracker import NodeTracker


class AsyncConnection:
    """One connection whose header has been read; use `async with await open(...)`."""

    def __init__(self, path: Path, stream: SocketStream) -> None:
        self.path = path
        self._stream = stream
        self._buffer = BufferedByteReceiveStream(stream)
        self.header: list[str] = []

    @classmethod
    async def open(cls, path: Path, timeout: float | None = 10.0) -> AsyncConnection:  # noqa: ASYNC109
        """Connect and read the header, both within `timeout` (the blocking Connection's
        signature: the error for a timeout names it)."""
        problem = path_problem(path)
        if problem:
            raise NotRunning(problem)
        try:
            with anyio.fail_after(timeout):
                stream = await anyio.connect_unix(path)
        except OSError as error:
            raise connect_error(error, path, timeout) from None
        conn = cls(path, stream)
        try:
            with anyio.fail_after(timeout):
                conn.header = await conn.read_answer()
        except BaseException:
            await conn.aclose()
            raise
        return conn

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def __aenter__(self) -> AsyncConnection:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def readline(self) -> str:
        try:
            line = await self._buffer.receive_until(b"\n", MAX_LINE)
        except (anyio.IncompleteRead, anyio.EndOfStream, anyio.BrokenResourceError):
            raise Disconnected.at(self.path) from None
        except anyio.DelimiterNotFound:
            raise ProtocolError(f"a line longer than {MAX_LINE} bytes ({self.path})") from None
        try:
            return line.decode()
        except UnicodeDecodeError:
            raise ProtocolError(f"babblerd sent a line that is not UTF-8 ({self.path})") from None

    async def read_answer(self) -> list[str]:
        lines: list[str] = []
        while not ends(line := await self.readline()):
            lines.append(line)
        return lines

    async def send(self, request: str) -> None:
        try:
            await self._stream.send(f"{request}\n".encode())
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            raise Disconnected.at(self.path) from None

    async def request(self, request: str) -> list[str]:
        await self.send(request)
        return await self.read_answer()


class AsyncClient:
    """`Client`, awaited: each call opens its own short connection. `socket` and `timeout`
    as for `Client`."""

    def __init__(self, socket: str | os.PathLike[str] | None = None, timeout: float = 10.0):
        self.path = Path(socket) if socket is not None else default_socket()
        self.timeout = timeout

    async def request(self, request: str) -> list[str]:
        """A request's data lines (before `ok`)."""
        async with await AsyncConnection.open(self.path, self.timeout) as conn:
            with anyio.fail_after(self.timeout):
                return await conn.request(request)

    async def status(self) -> Status:
        return parse_status(one_json(await self.request("status"), "status"))

    async def nodes(self) -> list[Node]:
        return list((await self.status()).nodes)

    async def stats(self) -> dict[str, int]:
        value: dict[str, int] = one_json(await self.request("stats"), "stats")
        return value

    async def counters(self) -> Counters:
        """As `Client.counters`."""
        return parse_counters(one_json(await self.request("counters"), "counters"))

    async def watch(self, reconnect: bool = True) -> AsyncGenerator[Event, None]:
        """As `Client.watch`. Leave it with `break` or cancellation; for prompt clean-up
        use `contextlib.aclosing(client.watch())`."""
        policy = Reconnecting(reconnect)
        while True:
            try:
                async with await AsyncConnection.open(self.path, self.timeout) as conn:
                    await conn.send("watch")
                    while True:
                        yield policy.seen(parse_event(streamed(await conn.readline())))
            except RETRIED as error:
                lost, pause = policy.failed(error)
                if lost:
                    yield lost
                await anyio.sleep(pause)

    async def watch_nodes(self, reconnect: bool = True) -> AsyncGenerator[NodeEvent, None]:
        """As `Client.watch_nodes`."""
        tracker = NodeTracker()
        async for event in self.watch(reconnect):
            for change in tracker.feed(event):
                yield change
