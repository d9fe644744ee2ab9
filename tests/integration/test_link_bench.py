"""`babblerctl bench` against real responders: one node with the sweep while the remote
daemon's status stays quick; a line with shaped links (tc) where --all and --ring find the
slow link; the responder's limits (busy, bad requests, mesh sources only, --bench off)."""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from babbler.bench.wire import DEFAULT_PORT, percentile
from babbler.client import Client
from babbler.daemon.spawn import process_name
from babbler.lab import Lab, Node
from tests.integration.helpers import WAIT, LabFactory, until
from tests.needs import tool

CTL = str(Path(sys.executable).with_name("babblerctl"))


def bench(lab: Lab, node: Node, *args: str, timeout: float = 120) -> Any:
    """`babblerctl bench ... --json` run in `node`'s namespace, its JSON."""
    done = lab.exec(
        node, CTL, "--socket", str(node.socket), "bench", *args, "--json", timeout=timeout
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def named(lab: Lab, node: Node, count: int) -> bool:
    nodes = lab.status(node)["nodes"]
    return len(nodes) == count and all(n["name"] and n["reachable"] for n in nodes)


def responders(node: Node) -> list[int]:
    """The pids of bench responders under `node`'s babblerd."""
    found = subprocess.run(
        ["pgrep", "-P", str(node.pid), "-f", "bench.responder"], capture_output=True, text=True
    )
    return [int(pid) for pid in found.stdout.split()]


def listening(lab: Lab, node: Node, port: int = DEFAULT_PORT) -> bool:
    """Whether `node`'s bench responder listens yet: it starts behind a starting babblerd
    (spawn.BACKGROUND_NICE), so a node's routes can be in before it does."""
    return bool(lab.exec(node, "ss", "-Hltn", f"sport = :{port}").stdout.strip())


def responder_of(node: Node) -> int:
    """The pid of the one bench responder under `node`'s babblerd."""
    pids = responders(node)
    assert len(pids) == 1, (node.name, pids)
    return pids[0]


def test_a_bench_measures_a_node_and_its_daemon_stays_quick(make_lab: LabFactory) -> None:
    lab = make_lab(3, "line")  # n1 - n2 - n3
    n1, _, n3 = lab.nodes
    lab.wait_reachable(WAIT)
    until(lambda: named(lab, n1, 2), what="n2 and n3 known by name on n1")
    hops = {"n2": 1, "n3": 2}
    until(lambda: {n["name"]: n["hops"] for n in lab.status(n1)["nodes"]} == hops, what="hops")
    # The responder: a process of its own, without any capability.
    status = Path(f"/proc/{responder_of(n3)}/status").read_text()
    assert "CapEff:\t0000000000000000" in status and "CapBnd:\t0000000000000000" in status

    latencies: list[float] = []
    stop = threading.Event()

    def poll() -> None:  # n3's own status while n3 answers the bench
        client = Client(n3.socket)
        while not stop.is_set():
            started = time.monotonic()
            client.status()
            latencies.append(time.monotonic() - started)
            time.sleep(0.02)

    poller = threading.Thread(target=poll)
    poller.start()
    try:
        result = bench(lab, n1, "n3", "--duration", "2", "--max-size", "16M")
    finally:
        stop.set()
        poller.join()
    (node,) = result["nodes"]
    assert result["from"] == "n1" and node["name"] == "n3" and node["hops"] == 2
    assert node["error"] is None
    assert 0 < node["rtt_ms"]["p50"] <= node["rtt_ms"]["p99"] and node["rtt_ms"]["count"] == 1000
    assert node["send"]["gbit_s"] > 0.5 and node["receive"]["gbit_s"] > 0.5, node
    assert [row["bytes"] for row in node["sweep"]] == [1024 * 4**i for i in range(8)]
    assert len(latencies) > 50
    p99 = percentile(latencies, 99)
    print(
        f"\nstatus while benched: {len(latencies)} answers, p50 "
        f"{statistics.median(latencies) * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms"
    )
    assert p99 < 0.050  # the bound: the bench never costs the control plane


def shape(lab: Lab, node: Node, link: str, rate: str) -> None:
    """Limit what `node` sends on `link` to `rate` (tc tbf)."""
    done = lab.exec(
        node, tool("tc", "iproute2"), "qdisc", "add", "dev", link, "root", "tbf",
        "rate", rate, "burst", "256kb", "latency", "50ms",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def within(measured: float, wanted: float, share: float = 0.15) -> bool:
    return abs(measured - wanted) <= share * wanted


def test_all_finds_the_nodes_behind_a_slow_link(make_lab: LabFactory) -> None:
    lab = make_lab(4, "line")  # n1 - n2 =100M= n3 - n4
    n1, n2, n3, _ = lab.nodes
    shape(lab, n2, "v2x3", "100mbit")
    shape(lab, n3, "v3x2", "100mbit")
    lab.wait_reachable(WAIT)
    until(lambda: named(lab, n1, 3), what="the others known by name on n1")
    measured = bench(lab, n1, "--all", "--duration", "2")
    assert measured["behind_slow_links"] == ["n3", "n4"]
    every = {n["name"]: n for n in measured["nodes"]}
    assert every["n2"]["send"]["gbit_s"] > 1.0  # unshaped
    for behind in ("n3", "n4"):  # both behind the 100 Mbit/s link
        for way in ("send", "receive"):
            assert within(every[behind][way]["gbit_s"], 0.1), (behind, way, every[behind])


def test_ring_finds_each_shaped_link(make_lab: LabFactory) -> None:
    """Each ring sender uses its own link one way and only its ACKs come back the other way
    (on a line the ring's flows would share links, ACKs queued behind data)."""
    lab = make_lab(4, "ring")  # n1 - n2 -100M-> n3 - n4 -1G-> n1
    n1, n2, _, n4 = lab.nodes
    shape(lab, n2, "v2x3", "100mbit")
    shape(lab, n4, "v4x1", "1gbit")
    lab.wait_reachable(WAIT)
    until(lambda: named(lab, n1, 3), what="the others known by name on n1")
    ring = bench(lab, n1, "--ring", "--duration", "3")["ring"]
    rates = {(r["from"], r["to"]): r["gbit_s"] for r in ring}
    assert set(rates) == {("n1", "n2"), ("n2", "n3"), ("n3", "n4"), ("n4", "n1")}
    assert within(rates[("n2", "n3")], 0.1) and within(rates[("n4", "n1")], 1.0), rates
    assert rates[("n1", "n2")] > 1.0 and rates[("n3", "n4")] > 1.0, rates


PROBE = """
import json, socket, sys
address, port, source = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def ask(line, bind=None):
    s = socket.socket(socket.AF_INET6)
    s.settimeout(10)
    try:
        if bind:
            s.bind(bind)
        s.connect((address, port))
        s.sendall(line)
        data = b""
        while chunk := s.recv(4096):
            data += chunk
        return data.decode()
    except OSError as error:
        return type(error).__name__
    finally:
        s.close()
hold = socket.create_connection((address, port), timeout=10)
hold.sendall(b'{"test": "recv", "seconds": 3}\\n')  # a session in progress
first = hold.recv(100)
out = {
    "first": first.decode().split("\\n")[0],
    "busy": ask(b'{"test": "rtt", "size": 64, "count": 1}\\n'),
    "bad": ask(b'{"test": "flood"}\\n'),
}
hold.close()
# A source outside the mesh /48 (the link-local address): closed, no answer.
out["outside"] = ask(b'{"test": "rtt", "size": 64, "count": 1}\\n', (source, 0, 0, 2))
print(json.dumps(out))
"""


def test_the_responder_is_one_session_at_a_time_and_mesh_only(make_lab: LabFactory) -> None:
    lab = make_lab(2, "line", False)
    n1, n2 = lab.nodes
    lab.start(n1, ["--bench", "off"])
    lab.start(n2)
    lab.wait_reachable(WAIT)
    target = lab.status(n2)["node_address"]
    link_local = next(
        line.split()[3].split("/")[0]
        for line in lab.exec(
            n1, "ip", "-6", "-o", "addr", "show", "dev", "v1x2"
        ).stdout.splitlines()
        if " fe80:" in line
    )
    until(lambda: listening(lab, n2), what="n2's bench responder listening")
    done = lab.exec(n1, sys.executable, "-c", PROBE, target, str(DEFAULT_PORT), link_local)
    out = json.loads(done.stdout)
    assert out["first"] == '{"ok": true}', out
    assert json.loads(out["busy"]) == {"error": "busy"}
    assert json.loads(out["bad"])["error"].startswith("bad request: test must be one of")
    assert out["outside"] in ("", "ConnectionResetError"), out
    # n1 runs with --bench off: nothing answers there, and babblerctl says so.
    until(lambda: named(lab, n2, 1), what="n1 known on n2")
    refused = lab.exec(
        n2, CTL, "--socket", str(n2.socket), "bench", "n1", "--no-sweep", "--duration", "0.2"
    )
    assert (
        refused.returncode == 1
        and "is babblerd there running with --bench on?" in refused.stdout + refused.stderr
    )
    assert responders(n1) == []


def test_the_responder_is_restarted_and_never_outlives_its_babblerd(make_lab: LabFactory) -> None:
    lab = make_lab(2, "line")
    n1 = lab.nodes[0]
    lab.wait_reachable(WAIT)
    first = responder_of(n1)
    os.kill(first, signal.SIGKILL)  # the responder dies: babblerd starts another
    until(lambda: responders(n1) not in ([], [first]), what="a new responder")
    assert lab.status(n1)["mesh"] == "running"
    second = responder_of(n1)
    os.kill(n1.pid or 0, signal.SIGKILL)  # babblerd dies: its responder goes with it
    lab.wait_exit(n1)
    until(lambda: process_name(second) is None, what="the responder gone (or a zombie)")
