"""How babbler's cost grows with the mesh: rings (and grids) of growing size, babblerd next
to babeld, with and without clients.

For each size, on fresh namespaces each time: babeld alone at babbler's hello interval (the
reference), then babbler (babblerd running babeld). Reported per size, per node: time from
start to every node pinging every other; over a window once converged, CPU (% of one core)
and RSS of babblerd and of babeld and the ratio babblerd / babeld, first with no clients,
then with WATCHERS `watch` clients on every node; babeld's lines into babblerd per second,
the share dropped as repeats, and the lines and events out to clients per second.

    sudo .venv/bin/python bench/scale.py [--sizes 4 8 16 32 64] [--topology ring grid]
                                          [--hello 0.1] [--window 10] [--quick]

Results are written after every size, so a long run that fails later keeps what it measured.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path
from typing import Any

import common
from common import rss_mb
from meshes import BABBLER_MODES, Mesh, wait_reachable

from babbler.client import ask
from babbler.core.config import DEFAULT_HELLO_INTERVAL
from babbler.lab import Lab, Node

REFERENCE = "babeld-same-hello"
SETTLE = 2.0  # seconds after full reachability (or after clients join) before measuring
WATCHERS = 10  # `watch` clients per node in the second window


def measure(
    daemons: list[int], babelds: list[int], nodes: list[Node], window: float
) -> dict[str, Any]:
    """One window: CPU per node of both, and babblerd's line counters (per second, mean per
    node) from `stats` before and after."""
    before = [ask(n.socket, "stats") for n in nodes] if daemons else []
    started = time.monotonic()
    cpu = common.cpu_percent(daemons + babelds, window)
    took = time.monotonic() - started
    result: dict[str, Any] = {"babeld_cpu_percent": statistics.fmean(cpu[len(daemons) :])}
    if daemons:
        after = [ask(n.socket, "stats") for n in nodes]

        def per_second(key: str) -> float:
            return statistics.fmean(
                (a[key] - b[key]) / took for a, b in zip(after, before, strict=True)
            )

        result["babblerd_cpu_percent"] = statistics.fmean(cpu[: len(daemons)])
        result["ratio"] = result["babblerd_cpu_percent"] / max(result["babeld_cpu_percent"], 0.01)
        result["lines_in_per_s"] = per_second("babeld_lines_in")
        result["repeats_per_s"] = per_second("babeld_repeats")
        result["items_out_per_s"] = per_second("items_out")
    return result


def run(
    size: int, topology: str, mode: str, hello: float, window: float, limit: float
) -> dict[str, Any]:
    args = ["--mode", "always", "--hello-interval", f"{hello:g}"]
    lab = Lab.create(f"bs{os.getpid() % 1000}{size}", size, topology, args)
    mesh = Mesh(lab, mode, hello=hello)
    watchers: common.Subscribers | None = None
    try:
        started = time.monotonic()
        mesh.start_all()
        for node in lab.nodes:
            mesh.ready(node)
        reach = wait_reachable(lab, mesh, lab.nodes, started, limit)
        time.sleep(SETTLE)
        result: dict[str, Any] = {
            "nodes": size,
            "topology": topology,
            "hello_s": hello,
            "mode": mode,
            "reachable_s": reach,
        }
        if mode == REFERENCE:
            babelds = list(mesh.babeld_pids().values())
            result["idle"] = measure([], babelds, lab.nodes, window)
            result["babeld_rss_mb"] = statistics.fmean(rss_mb(p) for p in babelds)
            return result
        babelds = [lab.status(n)["babeld"]["pid"] for n in lab.nodes]
        daemons = [n.pid or 0 for n in lab.nodes]
        result["idle"] = measure(daemons, babelds, lab.nodes, window)
        sockets = [node.socket for node in lab.nodes for _ in range(WATCHERS)]
        watchers = common.Subscribers(sockets, b"watch\n")
        time.sleep(SETTLE)
        result["watched"] = measure(daemons, babelds, lab.nodes, window)
        result["babeld_rss_mb"] = statistics.fmean(rss_mb(p) for p in babelds)
        result["babblerd_rss_mb"] = statistics.fmean(rss_mb(p) for p in daemons)
        return result
    finally:
        if watchers is not None:
            watchers.close()
        mesh.stop()
        lab.down()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[4, 8, 16, 32, 64])
    parser.add_argument("--topology", nargs="+", default=["ring"], choices=["ring", "grid"])
    parser.add_argument("--hello", type=float, default=DEFAULT_HELLO_INTERVAL, help="seconds")
    parser.add_argument("--window", type=float, default=10.0, help="seconds of CPU measured")
    parser.add_argument("--limit", type=float, default=300.0, help="seconds to converge")
    parser.add_argument("--quick", action="store_true", help="one ring of 4, 2 s windows")
    parser.add_argument(
        "--babbler-mode",
        default="babbler",
        choices=list(BABBLER_MODES),
        help="which babbler to run beside the reference (babbler-ipv4-off: IPv4 off)",
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    common.need_root()
    sizes, window = ([4], 2.0) if args.quick else (args.sizes, args.window)
    topologies = ["ring"] if args.quick else args.topology
    rows, results = [], []
    for topology in topologies:
        for size in sizes:
            reference = run(size, topology, REFERENCE, args.hello, window, args.limit)
            babbler = run(size, topology, args.babbler_mode, args.hello, window, args.limit)
            results += [reference, babbler]
            data = {"window_s": window, "watchers": WATCHERS, "results": results}
            path = common.write("scale", data, args.out)
            idle, watched = babbler["idle"], babbler["watched"]
            rows.append(
                [
                    f"{topology} {size}, hello {args.hello:g}",
                    reference["reachable_s"],
                    babbler["reachable_s"],
                    reference["idle"]["babeld_cpu_percent"],
                    idle["babeld_cpu_percent"],
                    idle["babblerd_cpu_percent"],
                    idle["ratio"],
                    watched["babblerd_cpu_percent"],
                    watched["ratio"],
                    babbler["babblerd_rss_mb"],
                    idle["lines_in_per_s"],
                    100 * idle["repeats_per_s"] / max(idle["lines_in_per_s"], 0.01),
                    watched["items_out_per_s"],
                ]
            )
            print(f"  {topology} of {size}: done", flush=True)
    header = [
        "mesh",
        "reach s (babeld)",
        "reach s (babbler)",
        "babeld CPU % (alone)",
        "babeld CPU % (babbler)",
        "babblerd CPU %",
        "babblerd/babeld",
        f"babblerd CPU %, {WATCHERS} watch",
        f"babblerd/babeld, {WATCHERS} watch",
        "babblerd RSS MB",
        "lines in/s",
        "repeats %",
        f"out/s, {WATCHERS} watch",
    ]
    print(common.table("scale: per node", header, rows))
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
