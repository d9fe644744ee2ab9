"""How babbler's cost grows with the mesh: rings of growing size, babblerd next to babeld.

For each ring size, twice on fresh namespaces: babeld alone at babbler's hello interval (the
reference), then babbler (babblerd running babeld). Reported per size: time from start to
every node pinging every other, and, over a window once converged, CPU (% of one core) and
RSS per node, of babblerd and of babeld, and the ratio babblerd / babeld. No clients.

    sudo .venv/bin/python bench/scale.py [--sizes 4 8 16 32 64] [--window 10] [--quick]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path
from typing import Any

import common
from common import counters, rss_mb
from meshes import Mesh, wait_reachable

from babbler.lab import Lab

REFERENCE = "babeld-same-hello"
SETTLE = 2.0  # seconds after full reachability before measuring


def cpu_percent(pids: list[int], window: float) -> list[float]:
    """Each process's CPU use over the same window, in % of one core."""
    before = {pid: counters(pid)[1] for pid in pids}
    started = time.monotonic()
    time.sleep(window)
    took = time.monotonic() - started
    return [100 * (counters(pid)[1] - before[pid]) / took for pid in pids]


def run(size: int, mode: str, window: float, limit: float) -> dict[str, Any]:
    lab = Lab.create(f"bs{os.getpid() % 1000}{size}", size, "ring", ["--mode", "always"])
    mesh = Mesh(lab, mode)
    try:
        started = time.monotonic()
        for node in lab.nodes:
            mesh.start(node)
        for node in lab.nodes:
            mesh.ready(node)
        reach = wait_reachable(lab, mesh, lab.nodes, started, limit)
        time.sleep(SETTLE)
        if mode == REFERENCE:
            babeld = list(mesh.babeld_pids().values())
            daemons: list[int] = []
        else:
            babeld = [lab.status(n)["babeld"]["pid"] for n in lab.nodes]
            daemons = [n.pid or 0 for n in lab.nodes]
        cpu = cpu_percent(daemons + babeld, window)
        result: dict[str, Any] = {
            "nodes": size,
            "mode": mode,
            "reachable_s": reach,
            "babeld_cpu_percent": statistics.fmean(cpu[len(daemons) :]),
            "babeld_rss_mb": statistics.fmean(rss_mb(p) for p in babeld),
        }
        if daemons:
            result["babblerd_cpu_percent"] = statistics.fmean(cpu[: len(daemons)])
            result["babblerd_rss_mb"] = statistics.fmean(rss_mb(p) for p in daemons)
        return result
    finally:
        mesh.stop()
        lab.down()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[4, 8, 16, 32, 64])
    parser.add_argument("--window", type=float, default=10.0, help="seconds of CPU measured")
    parser.add_argument("--limit", type=float, default=300.0, help="seconds to converge")
    parser.add_argument("--quick", action="store_true", help="one ring of 4, 2 s window")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    common.need_root()
    sizes, window = ([4], 2.0) if args.quick else (args.sizes, args.window)
    rows, results = [], []
    for size in sizes:
        reference = run(size, REFERENCE, window, args.limit)
        babbler = run(size, "babbler", window, args.limit)
        results += [reference, babbler]
        ratio = babbler["babblerd_cpu_percent"] / max(babbler["babeld_cpu_percent"], 0.01)
        rows.append(
            [
                size,
                reference["reachable_s"],
                babbler["reachable_s"],
                reference["babeld_cpu_percent"],
                babbler["babeld_cpu_percent"],
                babbler["babblerd_cpu_percent"],
                ratio,
                babbler["babblerd_rss_mb"],
            ]
        )
        print(f"  ring of {size}: done", flush=True)
    header = [
        "nodes",
        "reach s (babeld)",
        "reach s (babbler)",
        "babeld CPU % (alone)",
        "babeld CPU % (babbler)",
        "babblerd CPU %",
        "babblerd/babeld",
        "babblerd RSS MB",
    ]
    print(common.table("scale: rings, per node, no clients", header, rows))
    path = common.write("scale", {"window_s": window, "results": results}, args.out)
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
