"""Cost: what babblerd itself uses.

idle         on-demand mode, no clients, links present: wake-ups per second (context
             switches of all its threads) and CPU, over --idle seconds (goal: 0 wake-ups)
ring100      a converged 10-node ring (always mode, real babeld), 100 `monitor` clients
             on n1: n1's babblerd CPU and wake-ups
rss          resident memory idle and with 1,000 connected clients (goal: < 80 MB)
exec-served  from exec to the public socket answering, --starts times (goal: < 1 s)

  sudo .venv/bin/python bench/cost.py [--idle 20] [--starts 10] [--quick] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import socket
import time
from pathlib import Path
from typing import Any

import common
from common import counters, rate, rss_mb

from babbler.client import Connection, NotRunning
from babbler.lab import Lab, Node


def hold(path: Path, count: int, request: bytes | None) -> list[socket.socket]:
    socks = []
    for _ in range(count):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(str(path))
        if request:
            sock.sendall(request)
        socks.append(sock)
    return socks


def drain(socks: list[socket.socket]) -> None:
    for sock in socks:
        sock.setblocking(False)
        try:
            while sock.recv(1 << 16):
                pass
        except BlockingIOError:
            pass


def exec_to_served(lab: Lab, node: Node) -> float:
    started = time.monotonic()
    lab.spawn(node)
    while True:
        if lab.exited(node) is not None:
            raise RuntimeError(f"babblerd exited: see {node.log}")
        try:
            with Connection(node.socket, timeout=2):
                return time.monotonic() - started
        except (NotRunning, OSError):
            time.sleep(0.002)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--idle", type=float, default=20.0, help="seconds per rate window")
    parser.add_argument("--starts", type=int, default=10)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    common.need_root()
    window = 2.0 if args.quick else args.idle
    starts = 2 if args.quick else args.starts
    data: dict[str, Any] = {}

    # idle, on demand, plus exec -> served and RSS with 1,000 clients
    lab = Lab.create(f"bo{os.getpid() % 10000}", 2, "line", ["--mode", "on-demand"])
    try:
        node = lab.nodes[0]
        served = []
        for _ in range(starts):
            served.append(exec_to_served(lab, node))
            time.sleep(1.0)  # settled
            if len(served) < starts:
                os.kill(node.pid or 0, 15)
                lab.wait_exit(node)
        data["exec_to_served_s"] = {"samples": served, **common.summary(served)}
        time.sleep(1.0)
        pid = node.pid or 0
        data["idle_on_demand"] = rate(pid, window)
        data["rss_idle_mb"] = rss_mb(pid)
        crowd = hold(node.socket, 1000, None)
        time.sleep(1.0)
        drain(crowd)
        data["rss_1000_clients_mb"] = rss_mb(pid)
        for sock in crowd:
            sock.close()
    finally:
        lab.down()

    # a 10-node ring with 100 monitor clients on n1
    if not args.quick:
        lab = Lab.create(f"bp{os.getpid() % 10000}", 10, "ring", ["--mode", "always"])
        try:
            lab.start_all()
            lab.wait_reachable(120)
            node = lab.nodes[0]
            pid = node.pid or 0
            data["ring_no_clients"] = rate(pid, window)
            clients = hold(node.socket, 100, b"monitor\n")
            stop = time.monotonic() + window + 1
            # The clients are drained here every 50 ms, as well-behaved readers would.
            s0, c0 = counters(pid)
            begun = time.monotonic()
            while time.monotonic() < stop:
                drain(clients)
                time.sleep(0.05)
            s1, c1 = counters(pid)
            took = time.monotonic() - begun
            ring = {"wakeups_per_s": (s1 - s0) / took, "cpu_percent": 100 * (c1 - c0) / took}
            data["ring_100_monitors"] = ring
            data["rss_ring_100_monitors_mb"] = rss_mb(pid)
            for sock in clients:
                sock.close()
        finally:
            lab.down()

    rows = [
        ["exec -> served, p50 s", data["exec_to_served_s"]["p50"]],
        ["exec -> served, max s", data["exec_to_served_s"]["max"]],
        ["idle on-demand wake-ups/s", data["idle_on_demand"]["wakeups_per_s"]],
        ["idle on-demand CPU %", data["idle_on_demand"]["cpu_percent"]],
        ["RSS idle MB", data["rss_idle_mb"]],
        ["RSS 1,000 clients MB", data["rss_1000_clients_mb"]],
    ]
    if "ring_100_monitors" in data:
        rows += [
            ["10-ring, no clients: wake-ups/s", data["ring_no_clients"]["wakeups_per_s"]],
            ["10-ring, no clients: CPU %", data["ring_no_clients"]["cpu_percent"]],
            ["10-ring, 100 monitors: wake-ups/s", data["ring_100_monitors"]["wakeups_per_s"]],
            ["10-ring, 100 monitors: CPU %", data["ring_100_monitors"]["cpu_percent"]],
            ["10-ring, 100 monitors: RSS MB", data["rss_ring_100_monitors_mb"]],
        ]
    print(common.table("cost of babblerd", ["measure", "value"], rows))
    print(f"\nwrote {common.write('cost', {'window_s': window, **data}, args.out)}")


if __name__ == "__main__":
    main()
