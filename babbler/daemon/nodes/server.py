"""The node info service: a TCP listener on the node address, answering `info` with one
JSON line to mesh sources only, then closing (DESIGN.md "Node info over the mesh").

Bounded whatever peers do: at most MAX_CONNECTIONS at once (more are closed at once), a
request line of at most MAX_REQUEST bytes read within READ_TIMEOUT, a token bucket per
source (nodeinfo.RateLimit), and answers capped at nodeinfo.ANSWER_CAP. It runs while the
mesh does (the node address exists only then).
"""

from __future__ import annotations

import socket
from collections.abc import Callable
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


async def serve(port: int, address: IPv6Address, answer: Callable[[], bytes]) -> None:
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
            await _accept(sock, answer)


async def _accept(listener: trio.socket.SocketType, answer: Callable[[], bytes]) -> None:
    limit = nodeinfo.RateLimit()
    active = 0

    async def one(conn: trio.socket.SocketType) -> None:
        nonlocal active
        try:
            with conn:
                await _answer_one(conn, answer)
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
            nursery.start_soon(one, conn)


async def _answer_one(conn: trio.socket.SocketType, answer: Callable[[], bytes]) -> None:
    request = b""
    with trio.move_on_after(READ_TIMEOUT):
        while b"\n" not in request and len(request) <= MAX_REQUEST:
            try:
                chunk = await conn.recv(MAX_REQUEST + 1)
            except OSError:
                return
            if not chunk:
                break
            request += chunk
    line = request.partition(b"\n")[0].strip()
    reply = answer() if line == nodeinfo.REQUEST else b"bad request\n"
    with trio.move_on_after(WRITE_TIMEOUT):
        try:
            view = memoryview(reply)
            while view:
                sent = await conn.send(view)
                view = view[sent:]
        except OSError:
            return
