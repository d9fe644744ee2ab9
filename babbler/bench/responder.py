"""The bench responder: answers `babblerctl bench` from other nodes on this node's address
(docs/bench.md). babblerd runs it as a process of its own, unprivileged, so that moving
gigabytes never touches the daemon's event loop or its privileges:

    python -m babbler.bench.responder --address NODE_ADDRESS [--port 6699]

One session at a time (others get `{"error": "busy"}`; a ring's own sends to this node
excepted), each ended after MAX_SESSION seconds; sources outside the mesh are closed at
once; at most PENDING connections waiting for their request line.

With IPv4 on it listens on this node's cable addresses too, as they come and go (looked for
every CABLE_POLL seconds): `babblerctl doctor --probe` sends over each cable, bound to its
own end's address, to the far end's.
"""

from __future__ import annotations

import argparse
import contextlib
import selectors
import socket
import sys
import threading
import time
from collections.abc import Iterable
from ipaddress import IPv4Address, IPv4Network

from babbler.bench import runner, wire
from babbler.bench.datapath import read_line, receive_exactly, receive_stream, send_stream
from babbler.core.ipv4 import cable_half

PENDING = 8  # connections between accept and their request, at once
BIND_RETRY = 1.0  # seconds: the node address appears when the mesh runs
# A ring's senders wait this long after their `ok`, so that every node of the ring has its
# own ring request (and lets the previous node's sends in) before the first send arrives.
RING_START = 0.5
CABLE_POLL = 1.0  # seconds between looks for this node's cable addresses


def local_ipv4() -> set[str]:
    """This host's IPv4 addresses, no privilege needed: netlink where pyroute2 is installed
    (Linux, babbler's dependency there), else netifaces (macOS's). An entry without an
    address is skipped: it must not spoil the rest (serve_cables would keep its old set)."""
    try:
        from pyroute2 import IPRoute
    except ImportError:
        import netifaces

        return ipv4_only(
            entry.get("addr")
            for name in netifaces.interfaces()
            for entry in netifaces.ifaddresses(name).get(netifaces.AF_INET, [])
        )
    with IPRoute() as ip:
        found = ip.get_addr(family=socket.AF_INET)
    return ipv4_only(a.get_attr("IFA_LOCAL") or a.get_attr("IFA_ADDRESS") for a in found)


def ipv4_only(values: Iterable[object]) -> set[str]:
    """The values that are IPv4 addresses (None and anything else left out)."""
    out = set()
    for value in values:
        if isinstance(value, str):
            with contextlib.suppress(ValueError):
                out.add(str(IPv4Address(value)))
    return out


class Responder:
    def __init__(
        self, addresses: list[str], port: int, ipv4_prefix: IPv4Network | None = None
    ) -> None:
        self.addresses = addresses  # the node addresses: IPv6, and IPv4 when it is on
        self.ipv4_prefix = ipv4_prefix  # IPv4 sources from it are of the mesh too
        self.port = port
        self.busy = threading.Lock()
        self.ring_token: str | None = None
        self.pending = threading.BoundedSemaphore(PENDING)

    def listen(self, address: str) -> socket.socket:
        """A listening socket on `address`, once that address exists."""
        family = socket.AF_INET if "." in address else socket.AF_INET6
        while True:
            sock = socket.socket(family, socket.SOCK_STREAM)
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind((address, self.port))
                sock.listen(16)
                return sock
            except OSError:
                sock.close()
                time.sleep(BIND_RETRY)

    def serve(self) -> None:
        """Serve every node address, a thread each, and the cable addresses, until killed."""
        for address in self.addresses[1:]:
            threading.Thread(target=self.serve_on, args=(address,), daemon=True).start()
        if self.ipv4_prefix is not None:
            threading.Thread(target=self.serve_cables, daemon=True).start()
        self.serve_on(self.addresses[0])

    def serve_on(self, address: str) -> None:
        listener = self.listen(address)
        print(f"bench responder on [{address}]:{self.port}", file=sys.stderr, flush=True)
        while True:
            self.accept(listener)

    def accept(self, listener: socket.socket) -> None:
        try:
            conn, peer = listener.accept()
        except OSError:
            time.sleep(0.1)  # out of descriptors, or a peer gone first
            return
        mesh = wire.mesh_source(peer[0], self.ipv4_prefix)
        if not mesh or not self.pending.acquire(blocking=False):
            conn.close()
            return
        threading.Thread(target=self.session, args=(conn,), daemon=True).start()

    def serve_cables(self) -> None:
        """Listen on each of this node's cable addresses while it has it (one thread)."""
        assert self.ipv4_prefix is not None
        half = cable_half(self.ipv4_prefix)
        listeners: dict[str, socket.socket] = {}
        selector = selectors.DefaultSelector()
        while True:
            try:
                here = {a for a in local_ipv4() if IPv4Address(a) in half}
            except (OSError, ValueError):
                here = set(listeners)
            for address in set(listeners) - here:
                selector.unregister(listeners[address])
                listeners.pop(address).close()
            for address in sorted(here - set(listeners)):
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                try:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    sock.bind((address, self.port))
                    sock.listen(16)
                except OSError:
                    sock.close()  # gone again, or taken: the next look tries again
                    continue
                listeners[address] = sock
                selector.register(sock, selectors.EVENT_READ)
            end = time.monotonic() + CABLE_POLL
            while (left := end - time.monotonic()) > 0:
                if not listeners:
                    time.sleep(left)
                    break
                for key, _ in selector.select(left):
                    self.accept(key.fileobj)  # type: ignore[arg-type]

    def session(self, conn: socket.socket) -> None:
        deadline = time.monotonic() + wire.MAX_SESSION
        held = False
        with conn:
            try:
                conn.settimeout(wire.REQUEST_TIMEOUT)
                try:
                    request = wire.parse(read_line(conn), self.ipv4_prefix)
                finally:
                    self.pending.release()
                guest = request.token is not None and request.test == "send"
                if guest and request.token != self.ring_token:
                    conn.sendall(wire.answer(error="busy"))
                    return
                if not guest:
                    held = self.busy.acquire(blocking=False)
                    if not held:
                        conn.sendall(wire.answer(error="busy"))
                        return
                if request.test == "ring":  # before `ok`: the previous node may come soon
                    self.ring_token = request.token
                conn.sendall(wire.answer(ok=True))
                conn.settimeout(max(0.1, deadline - time.monotonic()))
                self.run(conn, request, deadline)
            except wire.BadBenchRequest as error:
                with contextlib.suppress(OSError):
                    conn.sendall(wire.answer(error=f"bad request: {error}"))
            except OSError:
                pass  # the client went, or the session's time ran out
            finally:
                if held:
                    self.ring_token = None
                    self.busy.release()

    def run(self, conn: socket.socket, request: wire.Request, deadline: float) -> None:
        if request.test == "rtt":
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            buffer = memoryview(bytearray(request.size))
            for _ in range(request.count):
                receive_exactly(conn, buffer)
                conn.sendall(buffer)
        elif request.test == "send":
            got, seconds = receive_stream(conn, request.nbytes)
            conn.sendall(wire.answer(bytes=got, seconds=seconds))
        elif request.test == "recv":
            seconds = min(request.seconds, deadline - time.monotonic())
            send_stream(conn, request.nbytes, seconds)
            conn.shutdown(socket.SHUT_WR)
        elif request.test == "ring":
            time.sleep(RING_START)
            seconds = min(request.seconds, deadline - time.monotonic() - 1.0)
            conn.sendall(self.ring(request, seconds))

    def ring(self, request: wire.Request, seconds: float) -> bytes:
        """Send to the next node of the ring for `seconds` (as `babblerctl bench` sends,
        runner.send); its receiver's answer."""
        assert request.to is not None
        try:
            rate = runner.send(request.to, self.port, seconds, token=request.token)
        except (runner.BenchError, OSError, ValueError) as error:
            return wire.answer(error=f"cannot send to {request.to}: {error}")
        return wire.answer(bytes=rate.nbytes, seconds=rate.seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", required=True, help="the node address to serve on")
    parser.add_argument("--address-v4", help="the IPv4 node address to serve on too")
    parser.add_argument("--ipv4-prefix", type=IPv4Network, help="IPv4 sources of the mesh")
    parser.add_argument("--port", type=int, default=wire.DEFAULT_PORT)
    args = parser.parse_args()
    addresses = [args.address, *([args.address_v4] if args.address_v4 else [])]
    with contextlib.suppress(KeyboardInterrupt):
        Responder(addresses, args.port, args.ipv4_prefix).serve()


if __name__ == "__main__":
    main()
