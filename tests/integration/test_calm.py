"""What people see is true and calm: a node that is still connected never goes `down` when a
cable is pulled (the down hold), a node really cut off does, with `last_seen_s` and no path,
and node info is right soon after nodes start one by one, as a cluster boots."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from babbler.lab import Lab, Node
from babbler.lab.jobs import babblerctl
from tests.integration.helpers import LabFactory, until
from tests.integration.watcher import Follower

pytestmark = pytest.mark.integration


def hops(lab: Lab, node: Node) -> dict[str, Any]:
    return {n["name"]: n["hops"] for n in lab.status(node)["nodes"]}


def test_pulling_each_cable_of_a_ring_in_turn_sends_no_down(make_lab: LabFactory) -> None:
    lab = make_lab(5, "ring")
    n1 = lab.nodes[0]
    ring = {"n2": 1, "n3": 2, "n4": 2, "n5": 1}
    until(lambda: hops(lab, n1) == ring, what="n1 sees the ring")
    watchers = {node.name: Follower(node.socket, "watch") for node in lab.nodes}
    try:
        for a, b in lab.links:
            node, link = lab.nodes[a - 1], f"v{a}x{b}"
            assert lab.exec(node, "ip", "link", "set", link, "down").returncode == 0
            # the picture follows: n1 reaches everyone the other way round (generous bound)
            until(lambda: all(n["reachable"] for n in lab.status(n1)["nodes"]), what="reroute")
            if n1.index in (a, b):  # n1's own cable: its neighbour is now 4 hops away
                other = lab.nodes[(b if a == n1.index else a) - 1].name
                until(lambda: hops(lab, n1).get(other) == 4, what=f"{other} 4 hops away")  # noqa: B023
            time.sleep(1.5)  # past the down hold (1 s at hello 0.1)
            assert lab.exec(node, "ip", "link", "set", link, "up").returncode == 0
            until(lambda: hops(lab, n1) == ring, what="the ring back")
        for name, watcher in watchers.items():
            downs = [e["node"]["name"] for e in watcher.events("node") if e["action"] == "down"]
            assert downs == [], f"{name} was told these went down: {downs}"
    finally:
        for watcher in watchers.values():
            watcher.close()


def test_a_node_cut_off_goes_down_after_the_hold_with_last_seen(make_lab: LabFactory) -> None:
    lab = make_lab(3, "line")  # n1 - n2 - n3
    n1, n2, _ = lab.nodes
    until(lambda: hops(lab, n1) == {"n2": 1, "n3": 2}, what="n1 sees the line")
    watcher = Follower(n1.socket, "watch")
    try:
        cut = time.monotonic()
        assert lab.exec(n2, "ip", "link", "set", "v2x3", "down").returncode == 0

        def n3() -> dict[str, Any]:
            return next(n for n in lab.status(n1)["nodes"] if n["name"] == "n3")

        until(lambda: not n3()["reachable"], what="n3 unreachable")

        def downs() -> list[float]:
            return [
                t
                for t, line in list(watcher.lines)
                if line.startswith("{") and json.loads(line).get("action") == "down"
            ]

        until(lambda: len(downs()) >= 1, what="a down event")
        time.sleep(1)  # no second one
        assert len(downs()) == 1, watcher.events("node")
        (down,) = [e["node"]["name"] for e in watcher.events("node") if e["action"] == "down"]
        assert down == "n3" and downs()[0] - cut >= 1.0, "down before the hold was over"
        node = n3()
        assert node["hops"] is None and node["last_seen_s"] is not None
        assert node["route_lost_s"] is None
        path = babblerctl(n1, "path", "n3")
        assert path.returncode == 1 and path.stdout == ""
        assert path.stderr.startswith("babblerctl: no path to n3 (last seen "), path.stderr
        shown = babblerctl(n1, "nodes").stdout
        assert "LAST SEEN" in shown and "ago" in shown, shown
    finally:
        watcher.close()


@pytest.mark.parametrize(("count", "shape"), [(4, "line"), (6, "ring")])
def test_nodes_started_one_by_one_are_seen_right_soon_after(
    make_lab: LabFactory, count: int, shape: str
) -> None:
    """As a cluster boots: babblerds start 2 s apart. Within 10 s of the last start every
    node has every other's hops right and `path` works."""
    lab = make_lab(count, shape, False)
    for node in lab.nodes:
        lab.start(node)
        time.sleep(2)

    def distance(a: int, b: int) -> int:
        d = abs(a - b)
        return min(d, count - d) if shape == "ring" else d

    def expected(node: Node) -> dict[str, int]:
        return {o.name: distance(node.index, o.index) for o in lab.nodes if o is not node}

    def right() -> bool:
        return all(hops(lab, node) == expected(node) for node in lab.nodes)

    until(right, timeout=8, what="every node's hops right within 10 s of the last start")
    far = lab.nodes[count // 2]
    done = babblerctl(lab.nodes[0], "path", far.name)
    assert done.returncode == 0 and f"{distance(1, far.index)} hop" in done.stdout, done.stderr


def test_babblerctl_watch_outlives_a_babblerd_restart_unless_once(
    make_lab: LabFactory, tmp_path: Path
) -> None:
    lab = make_lab(2, "line")
    n1 = lab.nodes[0]
    ctl = [sys.executable, "-m", "babbler.ctl.main", "--socket", str(n1.socket), "watch"]
    printed, said = tmp_path / "watch.out", tmp_path / "watch.err"

    def snapshots() -> list[str]:
        return [x for x in printed.read_text().splitlines() if x.startswith('{"type":"snapshot"')]

    with printed.open("w") as out, said.open("w") as err:
        piped = subprocess.Popen(ctl, stdout=out, stderr=err, text=True)
    once = subprocess.Popen([*ctl, "--once"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        until(lambda: lab.status(n1)["clients"] >= 2, what="both watching")
        os.kill(n1.pid or 0, signal.SIGTERM)  # this node's babblerd restarts
        lab.wait_exit(n1)
        assert once.wait(timeout=30) == 1  # --once: ends with babblerd
        lab.start(n1)
        # JSON when piped, and a new snapshot after the restart
        until(lambda: len(snapshots()) == 2, what="watch back with a new snapshot")
    finally:
        piped.terminate()
        piped.wait(timeout=30)
        once.kill()
        once.communicate()
    assert "waiting for it to come back" in said.read_text(), said.read_text()
