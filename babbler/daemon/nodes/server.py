"""The node info service: a TCP listener on the node address, answering `info` with one
JSON line to mesh sources only, then closing (DESIGN.md "Node info over the mesh"); taking
`push`, another node's own info given to us when it changed (nodes/own.py), from that
node's own node address only (the service checks), answered `ok` or `bad ...`; and
answering `counters` with this node's link counters (a viewer's, nodes/viewer.py).

Bounded whatever peers do: at most MAX_CONNECTIONS at once (more are closed at once), a
request line of at most MAX_REQUEST bytes (a push's info: ANSWER_CAP) read within
READ_TIMEOUT, a token bucket per source (nodeinfo.RateLimit), and answers capped at
nodeinfo.ANSWER_CAP. It runs while the mesh does (the node address exists only then).
"""

from __future__ import annotations

import socket
from collections.abc import Awaitable, Callable
from ipaddress import IPv6Address

import structlog
import trio

from babbler.daemon.nodes import answer as nodeinfo

log = structlog.get_logger("babbler.info")

MAX_CONNECTIONS = 64
MAX_REQUEST = 64
READ_TIMEOUT = 2.0  # seconds for the request line
WRITE_TIMEOUT = 5.0  # seconds for the answer
BIND_RETRY = 1.0  # seconds between tries while the node address is not there yet
ACCEPT_PAUSE = 0.1  # after a failed accept (EMFILE): let descriptors free up, don't spin


Answer = Callable[[IPv6Address], bytes]  # our info, for the asker at this source
Take = Callable[[IPv6Address, bytes], bytes]  # a push from this source: the reply line
Count = Callable[[IPv6Address], Awaitable[bytes]]  # our link counters, for this source


async def _no_counters(source: IPv6Address) -> bytes:
    return b"bad request\n"


async def serve(
    port: int, address: IPv6Address, answer: Answer, take: Take, count: Count = _no_counters
) -> None:
    """Serve until cancelled. A bind that fails (the address not there yet) is retried."""
    while True:
        sock = trio.socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            await sock.bind((str(address), port))
            sock.listen(MAX_CONNECTIONS)
        except OSError as error:
            sock.close()
            log.debug("node info not bound yet", address=str(address), error=str(error))
            await trio.sleep(BIND_RETRY)
            continue
        log.info("serving node info", address=str(address), port=port)
        with sock:
            await _accept(sock, answer, take, count)


async def _accept(
    listener: trio.socket.SocketType, answer: Answer, take: Take, count: Count
) -> None:
    limit = nodeinfo.RateLimit()
    active = 0

    async def one(conn: trio.socket.SocketType, source: IPv6Address) -> None:
        nonlocal active
        try:
            with conn:
                await _answer_one(conn, source, answer, take, count)
        finally:
            active -= 1

    async with trio.open_nursery() as nursery:
        while True:
            try:
                conn, peer = await listener.accept()
            except OSError as error:  # out of descriptors, or a peer gone before accept
                log.debug("node info accept failed", error=str(error))
                await trio.sleep(ACCEPT_PAUSE)
                continue
            source = IPv6Address(peer[0].split("%")[0])
            refused = (
                active >= MAX_CONNECTIONS
                or not nodeinfo.from_the_mesh(source)
                or not limit.allow(source, trio.current_time())
            )
            if refused:
                conn.close()
                continue
            active += 1
            nursery.start_soon(one, conn, source)


async def _read_line(conn: trio.socket.SocketType, data: bytes, cap: int) -> bytes | None:
    """`data` and what follows it up to the first newline, read within READ_TIMEOUT and at
    most `cap` bytes; None when the peer went, sent more, or took too long."""
    with trio.move_on_after(READ_TIMEOUT):
        while b"\n" not in data and len(data) <= cap:
            try:
                chunk = await conn.recv(cap + 1 - len(data))
            except OSError:
                return None
            if not chunk:
                break
            data += chunk
    return data if b"\n" in data and data.index(b"\n") < cap else None


async def _answer_one(
    conn: trio.socket.SocketType, source: IPv6Address, answer: Answer, take: Take, count: Count
) -> None:
    request = await _read_line(conn, b"", MAX_REQUEST) or b""
    line, _, rest = request.partition(b"\n")
    if line.strip() == nodeinfo.REQUEST:
        reply = answer(source)
    elif line.strip() == nodeinfo.PUSH:
        pushed = await _read_line(conn, rest, nodeinfo.ANSWER_CAP)
        reply = take(source, pushed) if pushed is not None else b"bad push: not one line\n"
    elif line.strip() == nodeinfo.COUNTERS:
        reply = await count(source)
    else:
        reply = b"bad request\n"
    with trio.move_on_after(WRITE_TIMEOUT):
        try:
            view = memoryview(reply)
            while view:
                sent = await conn.send(view)
                view = view[sent:]
        except OSError:
            return
