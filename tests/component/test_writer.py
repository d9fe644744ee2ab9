"""The client writer, cut short mid-line, knows the rest of that line."""

from __future__ import annotations

import socket

import trio

from babbler.daemon import fanout, server


async def test_cut_short_writer_keeps_the_rest_of_the_line() -> None:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    stream = trio.SocketStream(trio.socket.from_stdlib_socket(a))
    peer = trio.SocketStream(trio.socket.from_stdlib_socket(b))
    client = fanout.Client(1)
    line = "change neighbour 5600000000a1 address fe80::2 if v1x2 reach ffff cost 96\n"
    client.offer(line * 5000)  # far more than the socket buffers hold
    with trio.move_on_after(0.2):
        await server._write_queued(stream, client)
    received = b""
    with trio.move_on_after(0.2):
        while chunk := await peer.receive_some(65536):
            received += chunk
    cut = len(received) % len(line)
    assert cut != 0, "the buffer sizes should cut a line; adjust the line length"
    assert received + client.unfinished == line.encode() * (len(received) // len(line) + (cut > 0))
    await stream.aclose()
    await peer.aclose()
