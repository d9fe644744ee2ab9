"""True right after a pull (issue 33 item 3): how long what n1 shows lags babeld's route.

A 5-ring n1..n5 of babblerds. Each run, from a converged ring (n1's route to n3 by n2, and
n1's `path` and `graph` saying so), the cable n2 - n3 is pulled; n1's status is read every
--sample seconds, and from the pull (the moment before the first end goes down) it is noted
when, first:
  (a) babeld's route on n1 to n3 moved (`status.nodes[].interface`, babeld's route as
      babblerd reads it, left the link it left by: v1x5, the way round);
  (b) n1's `path` to n3 (babbler.ui.render.path_of) agreed with that route (left by its
      link) and did not walk the pulled cable;
  (c) n1's `graph` (babbler.core.graph Graph.from_status) held the pulled cable from
      neither end.
Then the cable is plugged back and the ring left to converge again. Printed per run and as
p50 / max: (b)-(a) and (c)-(a) (0: in the same reading; the reading is the resolution),
and how many readings from (a) on showed a path or HOPS that contradicted the route.

    sudo .venv/bin/python bench/after_pull.py [--runs 10] [--sample 0.05] [--out FILE]

Against another checkout (its babbler, this file copied into its bench/):
`sudo PYTHONPATH=/that/checkout .venv/bin/python /that/checkout/bench/after_pull.py`.
"""

from __future__ import annotations

import argparse
import itertools
import os
import time
from pathlib import Path
from typing import Any

import common
from meshes import Mesh, wait_reachable

from babbler.client.model import parse_status
from babbler.core.errors import BabblerError
from babbler.core.graph import Graph
from babbler.lab import Lab, Node, wait
from babbler.ui.render import path_of

NODES = 5
CABLE = (2, 3)  # pulled each run: n2 - n3
FAR = "n3"  # n1's route to it leaves by n2 before the pull, by n5 after
BEFORE, AFTER = "v1x2", "v1x5"
LIMIT = 60.0  # seconds for each wait: a ring converging, a run's three moments
SETTLE = 3.0  # seconds a converged ring is left before the next pull


def reading(status: dict[str, Any], target: str) -> dict[str, Any]:
    """What n1 shows of `target` (node id): babeld's route's link, HOPS, the names `path`
    walks and the link it leaves by (None: no path), and whether `graph` holds the cable."""
    # not listed yet right after the ring forms: babeld routes before the infos arrive
    node: dict[str, Any] = next((n for n in status["nodes"] if n["node_id"] == target), {})
    graph = Graph.from_status(status)
    try:
        path = path_of(parse_status(status), target)
        walked = [path["from"]] + [s["to"] for s in path["steps"]]
        first = path["steps"][0]["interface"]
    except BabblerError:
        walked, first = [], None
    a, b = (f"n{i}" for i in CABLE)
    held = any(
        {graph.names[frm], graph.names[e.to]} == {a, b}
        for frm, edges in graph.edges.items()
        for e in edges
    )
    return {
        "interface": node.get("interface"),
        "hops": node.get("hops"),
        "walked": walked,
        "first": first,
        "held": held,
    }


def walks_cable(walked: list[str]) -> bool:
    pulled = {f"n{i}" for i in CABLE}
    return any({x, y} == pulled for x, y in itertools.pairwise(walked))


def converged(lab: Lab, n1: Node, target: str) -> bool:
    """n1's route to the far node by n2, `path` by n2 and the cable in `graph`."""
    seen = reading(lab.status(n1), target)
    return bool(
        seen["interface"] == BEFORE and seen["walked"] == ["n1", "n2", FAR] and seen["held"]
    )


def run_once(lab: Lab, n1: Node, target: str, sample: float) -> dict[str, Any]:
    """One pull: the three moments (seconds from the pull; None: not within LIMIT) and the
    readings from (a) on whose path or HOPS contradicted babeld's route."""
    found: dict[str, float | None] = {"a": None, "b": None, "c": None}
    readings = contradicting = 0
    pulled = time.monotonic()
    lab.plug(*CABLE, up=False)
    while None in found.values() and time.monotonic() - pulled < LIMIT:
        seen = reading(lab.status(n1), target)
        at = time.monotonic() - pulled
        readings += 1
        moved = seen["interface"] == AFTER
        agrees = moved and seen["first"] == AFTER and not walks_cable(seen["walked"])
        if moved and found["a"] is None:
            found["a"] = at
        if agrees and found["b"] is None:
            found["b"] = at
        if not seen["held"] and found["c"] is None:
            found["c"] = at
        if found["a"] is not None and (not agrees or seen["hops"] not in (3, None)):
            contradicting += 1
        time.sleep(sample)
    return {**found, "readings": readings, "contradicting": contradicting}


def since_a(run: dict[str, Any], moment: str) -> float | None:
    if run["a"] is None or run[moment] is None:
        return None
    return float(run[moment] - run["a"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--sample", type=float, default=0.05, help="seconds between readings")
    parser.add_argument("--lab-name", default=f"ap{os.getpid() % 10000}")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    common.need_root()
    lab = Lab.create(args.lab_name, NODES, "ring", ["--mode", "always"])
    mesh = Mesh(lab, "babbler")
    runs = []
    try:
        for node in lab.nodes:
            mesh.start(node)
        for node in lab.nodes:
            mesh.ready(node)
        wait_reachable(lab, mesh, lab.nodes, time.monotonic(), LIMIT)
        n1 = lab.nodes[0]
        target = lab.status(lab.node(FAR))["node_id"]
        for n in range(args.runs):
            if not wait.until(lambda: converged(lab, n1, target), LIMIT):
                raise SystemExit(f"run {n + 1}: the ring did not converge within {LIMIT:g} s")
            time.sleep(SETTLE)
            run = run_once(lab, n1, target, args.sample)
            runs.append(run)
            print(
                f"  run {n + 1}: (a) {common.fmt(run['a'])} s, (b)-(a) "
                f"{common.fmt(since_a(run, 'b'))} s, (c)-(a) {common.fmt(since_a(run, 'c'))} s, "
                f"{run['contradicting']} of {run['readings']} readings contradicting",
                flush=True,
            )
            lab.plug(*CABLE)
    finally:
        mesh.stop()
        lab.down()
    report(runs, args)


def report(runs: list[dict[str, Any]], args: argparse.Namespace) -> None:
    rows: list[list[Any]] = [
        [n + 1, r["a"], since_a(r, "b"), since_a(r, "c"), f"{r['contradicting']}/{r['readings']}"]
        for n, r in enumerate(runs)
    ]
    columns = {
        "a": [r["a"] for r in runs],
        "b-a": [since_a(r, "b") for r in runs],
        "c-a": [since_a(r, "c") for r in runs],
    }
    summaries = {k: common.summary([v for v in vs if v is not None]) for k, vs in columns.items()}
    for stat in ("p50", "max"):
        rows.append([stat, *(summaries[k].get(stat) for k in columns), ""])
    header = ["run", "(a) route moved, s", "(b)-(a) path, s", "(c)-(a) graph, s", "contradicting"]
    title = (
        f"After a pull: n1 to {FAR} on a {NODES}-ring, n2 - n3 pulled, read every {args.sample:g} s"
    )
    print()
    print(common.table(title, header, rows))
    data = {"runs": runs, "sample_s": args.sample, "summary": summaries}
    path = common.write("after_pull", data, args.out)
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
