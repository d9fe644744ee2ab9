"""Start-up: from exec of babblerd to babeld spawned, against Python's own start.

On a 2-node lab line (links up and settled), each run, node 1 only:
  python    `ip netns exec N python -c pass`, exec to exit: Python's own start (with this
            interpreter's site, so an editable install's finder counts on both sides)
  babblerd  `ip netns exec N python -m babbler.daemon.cli ...`, exec to babeld's exec, which a
            wrapper script records (`date +%s.%N`, about 1 ms of its own) before exec'ing
            babeld; babblerd is then stopped with SIGTERM (a clean stop: the next run may
            start babeld early again)
Reported: median, min and max of each, and babblerd minus python (babbler's own part).
Each checkout's bytecode is compiled first, as an install does (pip, nix and distribution
packages ship it): a checkout run with PYTHONDONTWRITEBYTECODE (set on this machine) would
otherwise compile every babbler module again on every start, ~10 ms that no install pays.
--baseline PYTHON runs the same with another checkout's interpreter (its own editable
install), side by side in the same run (one run of each in turn), for before/after.

    sudo .venv/bin/python bench/startup.py [--runs 20] [--baseline /old/.venv/bin/python]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import common

from babbler.lab import Lab

WAIT = 10.0  # seconds for babeld to be spawned
# `python -m` and `-c` put the working directory first on sys.path: run from one without a
# babbler package, or every interpreter would run the checkout the bench was started in.
NEUTRAL = "/"


def python_start(netns: str, python: str) -> float:
    started = time.time()
    subprocess.run(["ip", "netns", "exec", netns, python, "-c", "pass"], check=True, cwd=NEUTRAL)
    return time.time() - started


def babblerd_start(netns: str, python: str, base: Path) -> float:
    """Seconds from exec to babeld's exec (wall clock, both sides)."""
    stamp = base / "spawned"
    stamp.unlink(missing_ok=True)
    wrapper = base / "babeld"
    babeld = shutil.which("babeld") or "babeld"
    wrapper.write_text(f'#!/bin/sh\ndate +%s.%N > {stamp}\nexec {babeld} "$@"\n')
    wrapper.chmod(0o755)
    args = [
        *("ip", "netns", "exec", netns, python, "-m", "babbler.daemon.cli"),
        *("--run-dir", str(base / "run"), "--state-dir", str(base / "state")),
        *("--interface", "v*", "--babeld", str(wrapper), "--log-format", "json"),
    ]
    log = (base / "babblerd.log").open("ab")
    started = time.time()
    daemon = subprocess.Popen(args, stdout=log, stderr=log, cwd=NEUTRAL)
    try:
        deadline = time.monotonic() + WAIT
        while not stamp.exists() or not stamp.read_text().strip():
            if time.monotonic() > deadline:
                raise TimeoutError(f"babeld not spawned within {WAIT:g} s (see {base})")
            time.sleep(0.005)
        took = float(stamp.read_text()) - started
        while not (base / "run" / "babblerd.sock").exists():  # serving: a clean stop next
            if time.monotonic() > deadline:
                raise TimeoutError(f"babblerd not serving within {WAIT:g} s (see {base})")
            time.sleep(0.01)
        return took
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(10)
        log.close()


def compile_bytecode(python: str) -> None:
    """What an install does: babbler's modules compiled to __pycache__ once."""
    where = "import babbler, os; print(os.path.dirname(babbler.__file__))"
    package = subprocess.run(
        [python, "-c", where], capture_output=True, text=True, check=True, cwd=NEUTRAL
    )
    subprocess.run([python, "-m", "compileall", "-q", package.stdout.strip()], check=True)


def measure(lab: Lab, pythons: list[str], runs: int) -> list[dict[str, Any]]:
    """Each interpreter in turn, round after round, so that the machine's drift during the
    run (it is shared) falls on all of them alike."""
    netns = lab.nodes[0].netns
    for python in pythons:
        compile_bytecode(python)
    bases = {python: Path(tempfile.mkdtemp(prefix="bst", dir="/tmp")) for python in pythons}
    py: dict[str, list[float]] = {python: [] for python in pythons}
    daemon: dict[str, list[float]] = {python: [] for python in pythons}
    try:
        for _ in range(runs):
            for python in pythons:
                py[python].append(python_start(netns, python))
                daemon[python].append(babblerd_start(netns, python, bases[python]))
        logs = {p: (bases[p] / "babblerd.log").read_text() for p in pythons}
    finally:
        for base in bases.values():
            shutil.rmtree(base, ignore_errors=True)
    return [
        {
            "python": python,
            "python_start_s": common.summary(py[python]),
            "exec_to_babeld_s": common.summary(daemon[python]),
            "babbler_part_s": statistics.median(daemon[python]) - statistics.median(py[python]),
            "started_early": logs[python].count('"babeld started early"'),
            "runs": runs,
        }
        for python in pythons
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--baseline", help="another checkout's python, measured alongside")
    parser.add_argument("--quick", action="store_true", help="3 runs")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    common.need_root()
    runs = 3 if args.quick else args.runs
    lab = Lab.create(f"bu{os.getpid() % 10000}", 2, "line", [])
    try:
        time.sleep(2.5)  # the links' link-local addresses leave DAD
        pythons = [sys.executable, *([args.baseline] if args.baseline else [])]
        results = measure(lab, pythons, runs)
    finally:
        lab.down()
    rows = [
        [
            "this checkout" if r["python"] == sys.executable else r["python"],
            r["python_start_s"]["p50"],
            r["exec_to_babeld_s"]["p50"],
            r["exec_to_babeld_s"]["min"],
            r["exec_to_babeld_s"]["max"],
            r["babbler_part_s"],
            f"{r['started_early']}/{runs}",
        ]
        for r in results
    ]
    header = ["babbler", "python s", "exec->babeld s", "min", "max", "babbler's part s", "early"]
    print(common.table("start-up, medians", header, rows))
    path = common.write("startup", {"results": results}, args.out)
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
