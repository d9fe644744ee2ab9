"""A fake babeld speaking babeld 1.12.1's control protocol (BABELD.md), for fault injection.

Takes babeld's command line (-G socket, -I pid file, trailing interface). Behaviour comes from
the environment:
  FAKE_BABELD_MODE     normal | exit (prints a complaint, exits 1) | silent (never greets)
                       | refuse, refuse-bad (answer `interface` with `no ...`, `bad`)
                       | mute (stops answering requests) | stubborn (ignores SIGTERM)
                       | cut (0.5 s after the first `monitor`, shuts that connection down
                         as babeld does when a reader is slow, and drops its xroute)
  FAKE_BABELD_LOG      a file to append "start PID", "request LINE" and "stop" lines to
  FAKE_BABELD_CHATTER  "INTERVAL,BURST": every INTERVAL s, BURST identical `change neighbour`
                       lines to monitor clients, as babeld repeats them on every hello
  SIGUSR1              its route is gone (as when the node behind it leaves): `flush` to
                       monitor clients, and no longer in a dump
  FAKE_BABELD_STAMP    a file: chatter lines then carry a sequence number as their rtt
                       (seq/1000), each one a real change, and "SEQ MONOTONIC_NS" is appended
                       to the file as it is sent (bench/latency.py joins the two)
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import socket
import sys
import time

MODE = os.environ.get("FAKE_BABELD_MODE", "normal")
LOG = os.environ.get("FAKE_BABELD_LOG")
CHATTER = os.environ.get("FAKE_BABELD_CHATTER")
STAMP = os.environ.get("FAKE_BABELD_STAMP")
GREETING = "BABEL 1.0\nversion babeld-1.12.1\nhost fake\nmy-id {my_id}\nok\n"
DEFAULT_ID = "02:00:00:ff:fe:00:00:01"  # babeld's own pick when the -c file names none


def router_id(args: list[str]) -> str:
    """The `router-id` of the -c file, as babeld takes it (BABELD.md), else DEFAULT_ID."""
    if "-c" in args:
        with contextlib.suppress(OSError), open(args[args.index("-c") + 1]) as config:
            for line in config:
                if line.startswith("router-id "):
                    return line.split()[1]
    return DEFAULT_ID


NEIGHBOUR = (
    "neighbour 5600000000a1 address fe80::2 if {if} reach ffff ureach 0000 "
    "rxcost 96 txcost 96 cost 96"
)
# The reach alternates so that every stamped line is a change `watch` sends too (it leaves
# out moves of the RTT alone, core/views.py WatchFilter).
STAMPED = (
    "neighbour 5600000000a1 address fe80::2 if {if} reach {reach} ureach 0000 "
    "rxcost 96 txcost 96 rtt {rtt} rttcost 0 cost 96"
)
ROUTE = (
    "route 5600000000b1 prefix fde0:20c6:1fa7:ffff:aaaa:bbbb:cccc:1/128 from ::/0 "
    "installed yes id 02:00:00:ff:fe:00:00:02 metric 96 refmetric 0 via fe80::2 if {if}"
)
XROUTE = "xroute x1 prefix fde0:20c6:1fa7:ffff:1a2b:3c4d:5e6f:1/128 from ::/0 metric 0"


def record(text: str) -> None:
    if LOG:
        with open(LOG, "a") as f:
            f.write(f"{text}\n")


def main() -> None:
    args = sys.argv[1:]
    sock_path = args[args.index("-G") + 1]
    pid_path = args[args.index("-I") + 1]
    first = args[-1]
    greeting = GREETING.format(my_id=router_id(args)).encode()
    record(f"start {os.getpid()} {time.monotonic():.3f}")
    if MODE == "exit":
        print("fake babeld: unknown option -Z, giving up", file=sys.stderr, flush=True)
        sys.exit(1)
    fd = os.open(pid_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.write(fd, f"{os.getpid()}\n".encode())
    os.close(fd)
    interfaces = [first]
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(sock_path)
    listener.listen(4)

    def finish(*_: object) -> None:
        record("stop")
        if stamps is not None:
            stamps.flush()
        for path in (sock_path, pid_path):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        os._exit(0)

    signal.signal(signal.SIGTERM, signal.SIG_IGN if MODE == "stubborn" else finish)
    signal.signal(signal.SIGINT, finish)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    buffers: dict[socket.socket, bytes] = {}
    monitors: set[socket.socket] = set()

    seq = 0
    stamps = open(STAMP, "a", buffering=1) if STAMP else None  # noqa: SIM115 (line-buffered)

    def neighbour() -> str:
        if stamps is None:
            return NEIGHBOUR.format(**{"if": first})
        reach = "ffff" if seq % 2 else "fffe"
        return STAMPED.format(**{"if": first, "rtt": f"{seq / 1000:.3f}", "reach": reach})

    cut_at: float | None = None  # mode cut: when to cut the first monitor connection
    cut_done = False
    route_gone = False

    def table() -> bytes:
        lines = [f"add interface {name} up true ipv6 fe80::1" for name in interfaces]
        lines += [
            "add " + neighbour(),
            *([] if cut_done else ["add " + XROUTE]),
            *([] if route_gone else ["add " + ROUTE.format(**{"if": first})]),
        ]
        return "".join(f"{line}\n" for line in lines).encode()

    def broadcast(text: str) -> None:
        for conn in list(monitors):
            try:
                conn.sendall(text.encode())
            except OSError:
                monitors.discard(conn)

    def drop_route(*_: object) -> None:
        nonlocal route_gone
        if not route_gone:
            route_gone = True
            broadcast("flush " + ROUTE.format(**{"if": first}) + "\n")

    signal.signal(signal.SIGUSR1, drop_route)

    def answer(conn: socket.socket, line: str) -> None:
        nonlocal cut_at
        record(f"request {line}")
        if MODE == "mute":
            return
        words = line.split()
        if not words:
            return
        if words[0] == "monitor":
            if MODE == "cut" and cut_at is None:
                cut_at = time.monotonic() + 0.5
            monitors.add(conn)
            conn.sendall(table() + b"ok\n")
        elif words[0] == "dump":
            conn.sendall(table() + b"ok\n")
        elif words[0] == "unmonitor":
            monitors.discard(conn)
            conn.sendall(b"ok\n")
        elif words[0] == "interface" and len(words) >= 2:
            if MODE == "refuse":
                conn.sendall(b"no refused by fake\n")
                return
            if MODE == "refuse-bad":
                conn.sendall(b"bad\n")
                return
            interfaces.append(words[1])
            broadcast(f"add interface {words[1]} up true ipv6 fe80::1\n")
            conn.sendall(b"ok\n")
        elif words[:2] == ["flush", "interface"] and len(words) == 3:
            if words[2] in interfaces:
                interfaces.remove(words[2])
                broadcast(f"flush interface {words[2]} up false\n")
                conn.sendall(b"ok\n")
            else:
                conn.sendall(b"no No such interface\n")
        elif words[0] == "quit":
            selector.unregister(conn)
            conn.close()
        else:
            conn.sendall(b"bad\n")

    interval, burst = (float(x) for x in CHATTER.split(",")) if CHATTER else (0.0, 0.0)
    next_chatter = time.monotonic() + interval
    while True:
        timeout = max(0.0, next_chatter - time.monotonic()) if interval else None
        if cut_at is not None and not cut_done:
            timeout = 0.05
            if time.monotonic() >= cut_at:  # babeld: shutdown(fd, 1) when a write times out
                for conn in monitors:
                    conn.shutdown(socket.SHUT_WR)
                monitors.clear()
                cut_done = True
        for key, _ in selector.select(timeout):
            if key.fileobj is listener:
                conn, _ = listener.accept()
                if MODE != "silent":
                    conn.sendall(greeting)
                selector.register(conn, selectors.EVENT_READ)
                buffers[conn] = b""
                continue
            conn = key.fileobj  # type: ignore[assignment]
            data = conn.recv(65536)
            if not data:
                selector.unregister(conn)
                monitors.discard(conn)
                conn.close()
                continue
            buffers[conn] += data
            while b"\n" in buffers[conn]:
                line, buffers[conn] = buffers[conn].split(b"\n", 1)
                answer(conn, line.decode())
        if interval and time.monotonic() >= next_chatter:
            if stamps is None:
                broadcast(("change " + neighbour() + "\n") * int(burst))
            else:
                for _ in range(int(burst)):
                    seq += 1
                    stamps.write(f"{seq} {time.monotonic_ns()}\n")
                    broadcast("change " + neighbour() + "\n")
            next_chatter += interval
            if next_chatter < time.monotonic() - 1:  # fell far behind: do not burst to catch up
                next_chatter = time.monotonic() + interval


if __name__ == "__main__":
    main()
