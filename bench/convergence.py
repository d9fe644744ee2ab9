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
babbler's hello interval (0.1 s), taken in turn run by run. Times start when the first daemon
is exec'd. join-line4 also prints where the join's time went (BREAKDOWN), per run and as a
table.

    sudo .venv/bin/python bench/convergence.py [--runs 5] [--quick] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import common
import jointap
from meshes import (
    BABBLER_MODES,
    MODES,
    Mesh,
    babelds_in,
    missing_routes,
    unreachable,
    wait_reachable,
)

from babbler.lab import PLATFORMS, Lab, wait

LIMIT = 120.0
# join-line4's breakdown: seconds from the new node's exec (babblerd's, or babeld's alone)
BREAKDOWN = {
    "babeld spawned": "its babeld forked (/proc, 10 ms ticks)",
    "address": "its first global address added (babeld alone: by the bench, before exec)",
    "served": "babblerd answers status",
    "wire hello": "the first Hello it sent reaches the far end of the new cable",
    "wire ihu": "the first IHU it sent reaches the far end: it heard that end's Hello",
    "known": "the bench knows its address (babblerd: from status)",
    "far end routes": "the far end's kernel routes to it (netlink, as it happens)",
    "it routes to all": "its kernel routes to every other node (netlink)",
    "all route to it": "every other node's kernel routes to it (netlink)",
    "routes": "every node's kernel routes to every other (polled every 0.02 s once known)",
    "pings": "every pair pings (the scenario's time)",
}
SCENARIOS = (
    "up-line4",
    "join-line4",
    "up-ring10",
    "kill-ring10",
    "plug-line3",
    "plug-line3-dad",
    "kill-ring10-dad",
)


def run_once(
    scenario: str,
    mode: str,
    tag: str,
    platform: str = "linux",
    marks: dict[str, float] | None = None,
    prefix: str = "bc",
) -> float:
    """Seconds the scenario took; `marks`: filled with the join's breakdown (`join`)."""
    nodes, topology = (4, "line") if scenario.endswith("line4") else (10, "ring")
    if scenario.startswith("plug"):
        nodes, topology = 3, "line"
    real = scenario.endswith("-dad")
    lab = Lab.create(
        f"{prefix}{tag}", nodes, topology, ["--mode", "always"], real_links=real, platform=platform
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
            return join(lab, mesh, marks if marks is not None else {})
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


def join(lab: Lab, mesh: Mesh, marks: dict[str, float]) -> float:
    """The 4th node starts at the end of the converged line: seconds until every pair pings
    (as `wait_reachable` polls), and in `marks` seconds from its exec to each step (BREAKDOWN)."""
    new, far = lab.nodes[3], lab.nodes[2]
    wire = jointap.Wire(far.netns, lab.end_name(far.index, new.index))
    added = jointap.Addresses(new.netns)
    routed = {node.index: jointap.Routes(node.netns) for node in lab.nodes}
    seen: dict[str, float] = {}
    try:
        boot = time.clock_gettime(time.CLOCK_BOOTTIME)
        started = time.monotonic()
        mesh.start(new)
        mesh.ready(new)
        seen["served"] = time.monotonic()

        def reachable() -> bool:
            missing = missing_routes(mesh, lab.nodes)
            if missing is None:
                return False
            seen.setdefault("known", time.monotonic())
            if any(missing.values()):
                return False
            seen.setdefault("routes", time.monotonic())
            return unreachable(lab, mesh, lab.nodes) == 0

        if not wait.until(reachable, started + LIMIT - time.monotonic(), every=0.02):
            raise TimeoutError(f"{mesh.mode}: not reachable within {LIMIT:g} s")
        took = time.monotonic() - started
        marks["babeld spawned"] = jointap.spawned_after(babelds_in(new.netns)[0], boot)
    finally:
        seen |= {f"wire {k}": v for k, v in wire.close().items()}
        seen |= added.close()
        for tap in routed.values():
            tap.close()
    # the pairs the join makes (netlink, as they happen): the others' routes to it, its own
    addresses = {node.index: str(mesh.address(node)) for node in lab.nodes}
    inbound = [routed[n.index].added.get(addresses[new.index]) for n in lab.nodes[:3]]
    outbound = [routed[new.index].added.get(addresses[n.index]) for n in lab.nodes[:3]]
    if (at_far := inbound[far.index - 1]) is not None:
        seen["far end routes"] = at_far
    if None not in inbound:
        seen["all route to it"] = max(t for t in inbound if t is not None)
    if None not in outbound:
        seen["it routes to all"] = max(t for t in outbound if t is not None)
    if mesh.mode not in BABBLER_MODES:
        seen.pop("served")  # nothing to serve: babeld alone starts in the background
    marks |= {name: at - started for name, at in seen.items()}
    marks["pings"] = took
    return took


def join_table(breakdown: dict[str, list[dict[str, float]]]) -> str:
    """p50 (min-max) of each step per mode, as docs/benchmarks.md shows it."""
    modes = list(breakdown)
    rows = []
    for step in BREAKDOWN:
        cells = []
        for mode in modes:
            values = [marks[step] for marks in breakdown[mode] if step in marks]
            summary = common.summary(values)
            cells.append(
                f"{summary['p50']:.3f} ({summary['min']:.3f}-{summary['max']:.3f})"
                if values
                else "-"
            )
        rows.append([step, *cells])
    return common.table("join-line4: s from exec, p50 (min-max)", ["step", *modes], rows)


def commit() -> str:
    """The checkout measured: HEAD, and whether babbler/ differed from it."""

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", "-C", str(common.ROOT), *args], capture_output=True, text=True
        )
        return done.stdout.strip()

    changed = git("status", "--porcelain", "--", "babbler")
    return git("rev-parse", "--short", "HEAD") + (" with babbler/ changed" if changed else "")


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
    parser.add_argument("--lab-prefix", default="bc", help="the labs' names start with this")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    common.need_root()
    scenarios = ("up-line4",) if args.quick else args.scenarios
    modes = ("babbler",) if args.quick else args.modes
    runs = 1 if args.quick else args.runs
    results: dict[str, dict[str, Any]] = {}
    breakdown: dict[str, list[dict[str, float]]] = {}
    for scenario in scenarios:
        times: dict[str, list[float]] = {mode: [] for mode in modes}
        for n in range(runs):  # the modes in turn: a load that comes and goes hits each alike
            for mode in modes:
                marks: dict[str, float] = {}
                took = run_once(
                    scenario,
                    mode,
                    f"{os.getpid() % 10000}{n}",
                    args.platform,
                    marks,
                    args.lab_prefix,
                )
                times[mode].append(took)
                print(f"  {scenario:11} {mode:17} run {n + 1}: {took:.2f} s", flush=True)
                if marks:
                    breakdown.setdefault(mode, []).append(marks)
                    steps = ", ".join(f"{k} {marks[k]:.3f}" for k in BREAKDOWN if k in marks)
                    print(f"    {steps}", flush=True)
        for mode in modes:
            done: dict[str, Any] = {"seconds": times[mode], **common.summary(times[mode])}
            if scenario == "join-line4":
                done["breakdown"] = breakdown.get(mode, [])
            results.setdefault(scenario, {})[mode] = done
    rows = [
        [s, m, r["n"], r["p50"], r["min"], r["max"]]
        for s, by_mode in results.items()
        for m, r in by_mode.items()
    ]
    print()
    print(common.table("convergence (s)", ["scenario", "mode", "runs", "p50", "min", "max"], rows))
    if breakdown:
        print()
        print(join_table(breakdown))
    data = {"runs": runs, "platform": args.platform, "results": results, "steps": BREAKDOWN}
    data["commit"] = commit()
    path = common.write("convergence", data, args.out)
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
