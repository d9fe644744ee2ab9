"""What a settled lab costs at idle, the macOS platform side by side with Linux: every process
in the lab's namespaces (babblerd, babeld, the bench responders, the macOS nodes' command
servers, and the commands they ran and reaped), as % of one core over a window, and on the
macOS platform the commands a node's babblerd runs per pass.

    sudo .venv/bin/python bench/lab_idle.py [--sizes 4 10] [--window 30] [--settle 10]
        [--name idle]

The reference is the Linux lab of the same size (the ratio macOS / Linux is reported). CPU
is read from /proc/PID/stat (time the processes used, not wall-clock timings), so other load
on the machine changes it little, and each lab's share is split by process (ROLES). Labs
are named NAME and a number (bbl-NAME1234-n1...).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

import common

from babbler.lab import Lab
from babbler.lab.processes import pids_in

TICKS = os.sysconf("SC_CLK_TCK")


# Who a process in a lab namespace is, by a word of its command line (the first that matches)
ROLES = (
    ("babblerd", "babbler.daemon.cli"),
    ("command server", "babbler.lab.macos.server"),
    ("responder", "babbler.bench.responder"),
    ("babeld", "babeld"),
)
# A process's children it reaped are counted apart: babblerd's are the commands it ran (on a
# macOS node the shims: bash, cat), the command server's the `ip` it ran to act.
REAPED = " (commands it ran)"


def role(pid: int) -> str:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return "other"
    return next((name for name, word in ROLES if word in cmdline), "other")


def cpu_seconds(lab: Lab) -> dict[str, float]:
    """CPU used so far by every live process in the lab's namespaces and by the children
    they reaped, by role (ROLES; REAPED: the children's)."""
    ticks: dict[str, int] = {}
    for node in lab.nodes:
        for pid in pids_in(node.netns):
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            name = role(pid)
            own, reaped = fields[11:13], fields[13:15]  # utime stime, cutime cstime
            ticks[name] = ticks.get(name, 0) + sum(int(f) for f in own)
            ticks[name + REAPED] = ticks.get(name + REAPED, 0) + sum(int(f) for f in reaped)
    return {name: value / TICKS for name, value in ticks.items()}


def commands_per_pass(lab: Lab, window: float) -> dict[str, float]:
    """On a macOS node: the command lines its server answered in `window`, per pass (a pass
    lists the links with one `ifconfig`)."""
    log = Path(lab.nodes[0].base) / "macos-server.log"
    start = len(log.read_text().splitlines())
    time.sleep(window)
    lines = [line.split(" ", 1)[1] for line in log.read_text().splitlines()[start:]]
    passes = max(1, lines.count("ifconfig"))
    counts: dict[str, float] = {}
    for line in lines:
        program = line.split()[0]
        counts[program] = counts.get(program, 0) + 1 / passes
    return {"passes_per_s": passes / window, **counts}


def run(platform: str, nodes: int, window: float, settle: float, prefix: str) -> dict[str, Any]:
    name = f"{prefix}{os.getpid() % 10000}"
    lab = Lab.create(name, nodes, "ring", ["--mode", "always"], platform=platform)
    try:
        lab.start_all()
        lab.wait_reachable(120)
        time.sleep(settle)
        before, started = cpu_seconds(lab), time.monotonic()
        time.sleep(window)
        after, elapsed = cpu_seconds(lab), time.monotonic() - started
        # a process that ended in the window (none should at idle) counts for what it used
        used = {k: 100 * (after.get(k, 0) - before.get(k, 0)) / elapsed for k in after}
        by_process = {k: v for k, v in sorted(used.items()) if v > 0}
        result: dict[str, Any] = {
            "cpu_percent": sum(by_process.values()),
            "by_process": by_process,
        }
        if platform == "macos":
            result["per_pass"] = commands_per_pass(lab, min(window, 10.0))
        return result
    finally:
        lab.down()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[4, 10])
    parser.add_argument("--window", type=float, default=30.0)
    parser.add_argument("--settle", type=float, default=10.0)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--name", default="idle", help="the labs' names start with this")
    args = parser.parse_args()
    common.need_root()
    rows, split, results = [], [], {}
    for size in args.sizes:
        linux = run("linux", size, args.window, args.settle, args.name)
        macos = run("macos", size, args.window, args.settle, args.name)
        results[str(size)] = {"linux": linux, "macos": macos}
        ratio = macos["cpu_percent"] / linux["cpu_percent"]
        per_pass = macos["per_pass"]
        said = ", ".join(f"{k} {v:.1f}" for k, v in per_pass.items() if k != "passes_per_s")
        rows.append([size, linux["cpu_percent"], macos["cpu_percent"], ratio, said])
        for process in sorted(set(linux["by_process"]) | set(macos["by_process"])):
            shares = [linux["by_process"].get(process, 0.0), macos["by_process"].get(process, 0.0)]
            split.append([size, process, *shares])
        common.write("lab_idle", {"window_s": args.window, "sizes": results}, args.out)
    print(
        common.table(
            f"A settled ring at idle, % of one core over {args.window:g} s (all its processes)",
            ["nodes", "linux", "macos", "macos/linux", "macOS commands per pass"],
            rows,
        )
    )
    print()
    print(common.table("By process, % of one core", ["nodes", "process", "linux", "macos"], split))


if __name__ == "__main__":
    main()
