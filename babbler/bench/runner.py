"""The measuring side of `babblerctl bench`: round trips, throughput each way, the size
sweep, and the ring, against other nodes' responders (blocking sockets; docs/bench.md)."""

from __future__ import annotations

import json
import secrets
import socket
import statistics
import threading
import time
from collections.abc import Callable, Sequence

from babbler.bench import wire
from babbler.bench.datapath import read_line, receive_exactly, receive_stream, send_stream
from babbler.bench.wire import Rate
from babbler.core.errors import BabblerError

CONNECT_TIMEOUT = 10.0
BUSY_WAIT = 2.0  # seconds a busy responder is asked again (it ends a session after answering)
# Seconds a refused connection is tried again: the responder starts behind the rest of a
# starting babblerd (spawn.BACKGROUND_NICE), so a node that has just come may not listen yet
# (on a busy 2-core host, seconds after its routes are in).
STARTING_WAIT = 10.0
RTT_SIZE = 64
RTT_COUNT = 1000
MIN_SWEEP_TIME = 0.05  # seconds: a size is repeated until this much time went to it (at most
MAX_REPEATS = 20  # this many times), its median taken: small messages are noisy alone

Progress = Callable[[float], None]  # told the fraction of the current step done, 0..1


class BenchError(BabblerError):
    """A bench could not be run or was refused; the message says why, in one line."""


def session(address: str, port: int, request: wire.Request) -> socket.socket:
    """A connection to a responder that accepted `request`; a responder still finishing
    our previous session (it answers before it is free) is asked again for up to
    BUSY_WAIT; one that refuses the connection (not started yet) for up to STARTING_WAIT.
    Raises BenchError."""
    start = time.monotonic()
    while True:
        try:
            return _session(address, port, request)
        except Busy:
            if time.monotonic() >= start + BUSY_WAIT:
                raise BenchError(
                    f"{address} is busy with another bench session; try again"
                ) from None
            time.sleep(0.01)
        except NotYet as refused:
            if time.monotonic() >= start + STARTING_WAIT:
                raise BenchError(
                    f"no bench responder at [{address}]:{port}: {refused} for "
                    f"{STARTING_WAIT:g} s (is babblerd there running with --bench on?)"
                ) from None
            time.sleep(0.2)


class Busy(Exception):
    """The responder is in another session."""


class NotYet(Exception):
    """Nothing listens on the responder's port (yet): the connection was refused."""


def _session(address: str, port: int, request: wire.Request) -> socket.socket:
    try:
        sock = socket.create_connection((address, port), timeout=CONNECT_TIMEOUT)
    except ConnectionRefusedError as error:
        raise NotYet(error.strerror or error) from None
    except OSError as error:
        raise BenchError(
            f"no bench responder at [{address}]:{port}: {error.strerror or error} "
            "(is babblerd there running with --bench on?)"
        ) from None
    try:
        sock.sendall(request.line())
        said = json.loads(read_line(sock))
    except (OSError, ValueError) as error:
        sock.close()
        raise BenchError(f"the responder at {address} did not answer: {error}") from None
    if said.get("ok") is not True:
        sock.close()
        reason = said.get("error", said)
        if reason == "busy":
            raise Busy
        raise BenchError(f"the responder at {address} refused: {reason}")
    sock.settimeout(wire.MAX_SESSION + CONNECT_TIMEOUT)
    return sock


def rtt(
    address: str, port: int, count: int = RTT_COUNT, progress: Progress | None = None
) -> list[float]:
    """Seconds per round trip of RTT_SIZE bytes, `count` of them."""
    with session(address, port, wire.Request("rtt", size=RTT_SIZE, count=count)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        message = bytes(RTT_SIZE)
        echo = memoryview(bytearray(RTT_SIZE))
        times = []
        for i in range(count):
            started = time.perf_counter()
            sock.sendall(message)
            receive_exactly(sock, echo)
            times.append(time.perf_counter() - started)
            if progress is not None and i % 50 == 0:
                progress(i / count)
    return times


def _result(sock: socket.socket) -> Rate:
    said = json.loads(read_line(sock))
    if "error" in said:
        raise BenchError(f"the responder said: {said['error']}")
    return Rate(int(said["bytes"]), float(said["seconds"]))


def send(
    address: str,
    port: int,
    seconds: float,
    progress: Progress | None = None,
    token: str | None = None,
) -> Rate:
    """This node to `address` for `seconds`, as the receiver measured it. `token`: a ring's
    send, which a responder busy with the same ring lets in (the responder's own use)."""
    tell = None if progress is None else _timed(seconds, progress)
    with session(address, port, wire.Request("send", token=token)) as sock:
        send_stream(sock, seconds=seconds, progress=tell)
        sock.shutdown(socket.SHUT_WR)
        return _result(sock)


def receive(address: str, port: int, seconds: float, progress: Progress | None = None) -> Rate:
    """`address` to this node for `seconds`, as measured here."""
    tell = None if progress is None else _timed(seconds, progress)
    with session(address, port, wire.Request("recv", seconds=seconds)) as sock:
        got, took = receive_stream(sock, progress=tell)
    return Rate(got, took)


def _timed(seconds: float, progress: Progress) -> Callable[[int], None]:
    started = time.monotonic()
    return lambda _: progress(min(1.0, (time.monotonic() - started) / seconds))


def message_time(address: str, port: int, size: int) -> float:
    """Seconds to send one message of `size` bytes and hear that all of it arrived."""
    with session(address, port, wire.Request("send", nbytes=size)) as sock:
        started = time.perf_counter()
        send_stream(sock, nbytes=size)
        _result(sock)
        return time.perf_counter() - started


def sweep(
    address: str, port: int, sizes: Sequence[int], progress: Progress | None = None
) -> list[tuple[int, float]]:
    """(size, seconds) per message size: the median of repeats for small sizes."""
    rows = []
    total = sum(sizes)
    done = 0
    for size in sizes:
        times = [message_time(address, port, size)]
        while sum(times) < MIN_SWEEP_TIME and len(times) < MAX_REPEATS:
            times.append(message_time(address, port, size))
        rows.append((size, statistics.median(times)))
        done += size
        if progress is not None:
            progress(done / total)
    return rows


def ring(addresses: Sequence[str], port: int, seconds: float) -> list[Rate | str]:
    """Every node sends to the next (the last to the first) at once, for `seconds`; each
    sender's rate as its receiver measured it, or why it failed."""
    token = secrets.token_hex(8)
    results: list[Rate | str] = ["not run"] * len(addresses)

    def one(i: int) -> None:
        following = addresses[(i + 1) % len(addresses)]
        request = wire.Request("ring", to=following, seconds=seconds, token=token)
        try:
            with session(addresses[i], port, request) as sock:
                results[i] = _result(sock)
        except (BenchError, OSError, ValueError) as error:
            results[i] = str(error)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(addresses))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results
