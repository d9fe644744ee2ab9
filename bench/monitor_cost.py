"""What babeld's `monitor` stream costs babeld itself, as the mesh grows.

babblerd holds one `monitor` connection to its babeld (DESIGN.md), and babeld writes every
route and neighbour notification to it, one write() per line, most of them repeats. This
measures that cost on babeld alone, without babblerd: rings of growing size, babeld at
babbler's hello interval and with its timestamps, a control socket on every node; babeld's
CPU per node over a window with nobody monitoring, then with a reader in `monitor` mode on
every node (one thread draining them all, counting lines).

    sudo .venv/bin/python bench/monitor_cost.py [--sizes 8 16 32] [--window 10] [--quick]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path
from typing import Any

import common
from meshes import Mesh, wait_reachable

from babbler.lab import Lab

OPTIONS = "enable-timestamps true"  # as babblerd's interface lines
SETTLE = 3.0  # seconds after full reachability before measuring


def cpu_per_node(pids: list[int], window: float) -> float:
    """babeld's mean CPU % per node over `window` seconds."""
    return statistics.fmean(common.cpu_percent(pids, window))


def measure(size: int, window: float, hello: float) -> dict[str, Any]:
    lab = Lab.create(f"bm{os.getpid() % 10000}", size, "ring", [])
    mesh = Mesh(lab, "babeld-same-hello", hello=hello, babeld_options=OPTIONS, control=True)
    try:
        time.sleep(2.5)  # the links' link-local addresses leave DAD
        started = time.monotonic()
        for node in lab.nodes:
            mesh.start(node)
        reach = wait_reachable(lab, mesh, lab.nodes, started, 120.0)
        time.sleep(SETTLE)
        pids = list(mesh.babeld_pids().values())
        alone = cpu_per_node(pids, window)
        monitors = common.Subscribers([mesh.control_socket(n) for n in lab.nodes], b"monitor\n")
        try:
            time.sleep(1.0)  # past the first dump
            first = monitors.lines
            monitored = cpu_per_node(pids, window)
            lines = (monitors.lines - first) / window / size
        finally:
            monitors.close()
    finally:
        mesh.stop()
        lab.down()
    return {
        "nodes": size,
        "hello_s": hello,
        "reachable_s": reach,
        "babeld_cpu_percent_unmonitored": alone,
        "babeld_cpu_percent_monitored": monitored,
        "monitor_lines_per_s_per_node": lines,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 16, 32])
    parser.add_argument("--window", type=float, default=10.0)
    parser.add_argument("--hello", type=float, default=0.1)
    parser.add_argument("--quick", action="store_true", help="4 nodes, a 2 s window")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    common.need_root()
    sizes, window = ([4], 2.0) if args.quick else (args.sizes, args.window)
    results = [measure(size, window, args.hello) for size in sizes]
    rows = [
        [
            r["nodes"],
            r["babeld_cpu_percent_unmonitored"],
            r["babeld_cpu_percent_monitored"],
            r["babeld_cpu_percent_monitored"] / max(r["babeld_cpu_percent_unmonitored"], 1e-9),
            r["monitor_lines_per_s_per_node"],
        ]
        for r in results
    ]
    header = ["nodes", "babeld CPU % alone", "monitored", "x", "lines/s per node"]
    print(common.table(f"babeld's monitor cost, hello {args.hello:g} s", header, rows))
    path = common.write("monitor-cost", {"window_s": window, "results": results}, args.out)
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
