"""`babblerctl metrics` on real nodes: promtool accepts what it prints, every node shows as
reachable, a cable's counters rise with the traffic it carries, and `-o` replaces the file
whole while a reader reads it (as node_exporter's textfile collector would)."""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

import pytest

from babbler.lab import Lab, Node
from babbler.lab.jobs import babblerctl
from tests.integration.helpers import WAIT, LabFactory, until
from tests.needs import tool

pytestmark = pytest.mark.integration
WRITES = 12  # `metrics -o` runs while the reader loops (each a babblerctl start-up)
PINGS = 200
PING_BYTES = 1000


def metrics(node: Node) -> str:
    done = babblerctl(node, "metrics")
    assert done.returncode == 0, done.stderr
    return done.stdout


def samples(text: str) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return out


def reachable_names(node: Node) -> dict[str, float]:
    shown = samples(metrics(node)).get("babbler_node_reachable", {})
    return {dict(labels)["node"]: value for labels, value in shown.items()}


def test_metrics_of_a_running_mesh_pass_promtool_and_show_every_node(
    make_lab: LabFactory, tmp_path: Path
) -> None:
    promtool = tool("promtool", "prometheus")
    lab = make_lab(3, "line")
    n1 = lab.nodes[0]
    lab.wait_reachable(WAIT)
    # Names come with each node's info, a moment after its route.
    until(lambda: reachable_names(n1) == {"n2": 1, "n3": 1}, what="n2 and n3 reachable by name")
    text = metrics(n1)
    checked = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                             text=True)  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr
    shown = samples(text)
    assert shown["babbler_up"] == {(): 1}
    assert shown["babbler_nodes_reachable"] == {(): 2}
    assert shown["babbler_mesh_state"][(("state", "running"),)] == 1
    assert shown["babbler_link_up"] == {(("link", "v1x2"),): 1}
    assert shown["babbler_routes_installed"][(("family", "ipv6"),)] >= 2
    assert dict(next(iter(shown["babbler_info"])))["node"] == "n1"
    neighbour = dict(next(iter(shown["babbler_neighbour_cost"])))
    assert neighbour["link"] == "v1x2" and neighbour["address"].startswith("fe80::")
    assert shown["babbler_daemon_tasks"][()] > 0

    _o_replaces_the_file_whole(lab, n1, tmp_path / "babbler.prom")

    lab.stop(n1)  # babblerd gone: up 0 in the file, exit 1
    done = babblerctl(n1, "metrics", "-o", str(tmp_path / "babbler.prom"))
    assert done.returncode == 1 and done.stderr.endswith("(babbler_up 0 shown)\n"), done.stderr
    assert samples((tmp_path / "babbler.prom").read_text()) == {"babbler_up": {(): 0}}


def _o_replaces_the_file_whole(lab: Lab, node: Node, target: Path) -> None:
    """`metrics -o` run again and again while a thread reads the file in a loop: every read
    is a whole exposition (the old one or the new one), and no temporary file stays."""
    seen: list[str] = []
    broken: list[str] = []
    done = threading.Event()

    def reader() -> None:
        while not done.is_set():
            try:
                text = target.read_text()
            except FileNotFoundError:
                continue
            seen.append(text[-60:])
            if not text.endswith("\n") or "babbler_daemon_tasks" not in text:
                broken.append(text[-200:])

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for _ in range(WRITES):
            written = babblerctl(node, "metrics", "-o", str(target))
            assert written.returncode == 0, written.stderr
    finally:
        done.set()
        thread.join(10)
    assert not broken, broken[:3]
    assert len(seen) > WRITES  # the reader read while the writes ran
    assert os.listdir(target.parent) == [target.name]
    assert oct(target.stat().st_mode & 0o777) == oct(0o644)
    assert samples(target.read_text())["babbler_up"] == {(): 1}


def test_a_cables_counters_rise_with_its_traffic(make_lab: LabFactory) -> None:
    lab = make_lab(2, "line")
    n1, n2 = lab.nodes
    lab.wait_reachable(WAIT)

    def counters() -> dict[str, float]:
        shown = samples(metrics(n1))
        return {
            name: shown.get(f"babbler_link_{name}_total", {}).get((("link", "v1x2"),), -1)
            for name in ("receive_bytes", "transmit_bytes", "receive_packets", "transmit_packets")
        }

    before = counters()
    assert min(before.values()) >= 0, before
    target = lab.status(n2)["node_address"]
    ping = lab.exec(n1, "ping", "-q", "-c", str(PINGS), "-i", "0.005", "-s", str(PING_BYTES),
                    target, timeout=60)  # fmt: skip
    assert ping.returncode == 0, ping.stdout + ping.stderr
    after = counters()
    for way in ("receive", "transmit"):
        assert after[f"{way}_bytes"] - before[f"{way}_bytes"] >= PINGS * PING_BYTES, after
        assert after[f"{way}_packets"] - before[f"{way}_packets"] >= PINGS, after
