"""Convergence: babbler against babeld alone, on the same namespaces and links.

Scenarios, each repeated --runs times per mode:
  up-line4    4-node line, every node started at once -> every node pings every other
  join-line4  a 4th node started at the end of a converged 3-node line -> full reachability
  up-ring10   10-node ring, every node started at once -> full reachability
  kill-ring10 the node opposite n1 on a converged 10-node ring dies (daemons SIGKILLed, its
              links dark, as a machine losing power) -> the other 9 reach each other
  plug-line3  a 3-node line whose daemons run before its cables are plugged in (links
              created down, then both ends up) -> full reachability; on the lab's DAD-free
              links
  plug-line3-dad  the same with the kernel's duplicate address detection, as on real
              cables (the lab's --real-links)
  kill-ring10-dad  kill-ring10 on real links (plugged once every daemon runs)
Modes: babbler (its defaults), babeld alone with its defaults (hello 4 s), babeld alone with
babbler's hello interval (0.1 s). Times start when the first daemon is exec'd.

    sudo .venv/bin/python bench/convergence.py [--runs 5] [--quick] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

import common
from meshes import BABBLER_MODES, MODES, Mesh, wait_reachable

from babbler.lab import PLATFORMS, Lab

LIMIT = 120.0
SCENARIOS = (
    "up-line4",
    "join-line4",
    "up-ring10",
    "kill-ring10",
    "plug-line3",
    "plug-line3-dad",
    "kill-ring10-dad",
)


def run_once(scenario: str, mode: str, tag: str, platform: str = "linux") -> float:
    nodes, topology = (4, "line") if scenario.endswith("line4") else (10, "ring")
    if scenario.startswith("plug"):
        nodes, topology = 3, "line"
    real = scenario.endswith("-dad")
    lab = Lab.create(
        f"bc{tag}", nodes, topology, ["--mode", "always"], real_links=real, platform=platform
    )
    mesh = Mesh(lab, mode)
    try:
        if scenario.startswith("plug"):
            if not real:  # DAD-free links, created up: take them down to plug them in
                for a, b in lab.links:
                    for x, y in ((a, b), (b, a)):
                        node = lab.nodes[x - 1]
                        lab.exec(node, "ip", "link", "set", lab.end_name(x, y), "down")
            for node in lab.nodes:
                mesh.start(node)
            for node in lab.nodes:
                mesh.ready(node)
            time.sleep(1)  # every daemon settled on its links being down
            started = time.monotonic()
            lab.plug_all()
            return wait_reachable(lab, mesh, lab.nodes, started, LIMIT)
        if scenario.startswith("up"):
            started = time.monotonic()
            for node in lab.nodes:
                mesh.start(node)
            for node in lab.nodes:
                mesh.ready(node)
            return wait_reachable(lab, mesh, lab.nodes, started, LIMIT)
        if scenario == "join-line4":
            first = lab.nodes[:3]
            for node in first:
                mesh.start(node)
            for node in first:
                mesh.ready(node)
            wait_reachable(lab, mesh, first, time.monotonic(), LIMIT)
            started = time.monotonic()
            mesh.start(lab.nodes[3])
            mesh.ready(lab.nodes[3])
            return wait_reachable(lab, mesh, lab.nodes, started, LIMIT)
        # kill-ring10: converge, let routes settle on shortest paths, kill the node opposite n1
        for node in lab.nodes:
            mesh.start(node)
        for node in lab.nodes:
            mesh.ready(node)
        if real:
            lab.plug_all()
        wait_reachable(lab, mesh, lab.nodes, time.monotonic(), LIMIT)
        time.sleep(3)
        victim = lab.nodes[5]
        started = time.monotonic()
        mesh.kill(victim)
        rest = [n for n in lab.nodes if n is not victim]
        return wait_reachable(lab, mesh, rest, started, LIMIT)
    finally:
        mesh.stop()
        lab.down()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="1 run, babbler only, up-line4")
    parser.add_argument("--scenarios", nargs="+", choices=SCENARIOS, default=list(SCENARIOS))
    parser.add_argument("--modes", nargs="+", choices=[*MODES, *BABBLER_MODES], default=list(MODES))
    parser.add_argument(
        "--platform",
        choices=PLATFORMS,
        default="linux",
        help="what the lab's nodes act as (macos: the lab's Macs, docs/macos.md)",
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    common.need_root()
    scenarios = ("up-line4",) if args.quick else args.scenarios
    modes = ("babbler",) if args.quick else args.modes
    runs = 1 if args.quick else args.runs
    results: dict[str, dict[str, Any]] = {}
    for scenario in scenarios:
        for mode in modes:
            times = []
            for n in range(runs):
                took = run_once(scenario, mode, f"{os.getpid() % 10000}{n}", args.platform)
                times.append(took)
                print(f"  {scenario:11} {mode:17} run {n + 1}: {took:.2f} s", flush=True)
            results.setdefault(scenario, {})[mode] = {"seconds": times, **common.summary(times)}
    rows = [
        [s, m, r["n"], r["p50"], r["min"], r["max"]]
        for s, by_mode in results.items()
        for m, r in by_mode.items()
    ]
    print()
    print(common.table("convergence (s)", ["scenario", "mode", "runs", "p50", "min", "max"], rows))
    data = {"runs": runs, "platform": args.platform, "results": results}
    path = common.write("convergence", data, args.out)
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
