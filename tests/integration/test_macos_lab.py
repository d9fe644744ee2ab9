"""babblerd's macOS code path end to end, in the lab: nodes whose commands act and print as a
Mac's (babbler/lab/macos/), real babeld, real traffic (issue "macOS in the lab")."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from babbler.daemon.spawn import process_name
from babbler.lab import Lab, Node
from babbler.lab.processes import in_netns
from tests import needs
from tests.integration.conftest import _print_logs
from tests.integration.helpers import WAIT, until


@pytest.fixture(scope="module")
def netifaces_installed() -> None:
    needs.netifaces()


def _lab(tag: str, nodes: int, topology: str, platform: str, bridged: bool = False) -> Lab:
    name = f"m{os.getpid() % 100000}{tag}"
    lab = Lab.create(
        name, nodes, topology, ["--mode", "always"], platform=platform, bridged=bridged
    )
    return lab


def _taken_down(lab: Lab) -> None:
    _print_logs(lab)
    lab.down()
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert f"bbl-{lab.name}-" not in left, left


@pytest.fixture(scope="module")
def ring(netifaces_installed: None) -> Iterator[Lab]:
    """One macOS 4-ring for most scenarios (each leaves it as it found it)."""
    lab = _lab("r", 4, "ring", "macos")
    try:
        lab.start_all()
        lab.wait_reachable(WAIT)
        yield lab
    finally:
        _taken_down(lab)


def babelds(lab: Lab, node: Node) -> list[int]:
    """The babeld processes running in the node's namespace."""
    pids = (int(entry) for entry in os.listdir("/proc") if entry.isdigit())
    return sorted(p for p in pids if process_name(p) == "babeld" and in_netns(p, node.netns))


def test_a_macos_ring_meshes_and_carries_both_families_over_two_hops(ring: Lab) -> None:
    statuses = [ring.status(node) for node in ring.nodes]
    assert {s["platform"] for s in statuses} == {"macos"}
    for s in statuses:  # its Thunderbolt ports, found through networksetup, carry the mesh
        assert sorted(i["name"] for i in s["interfaces"] if i["babel"]) == ["en2", "en3"]
        assert {i["kind"] for i in s["interfaces"]} == {"thunderbolt"}
        assert s["kernel_problem"] is None
    far = statuses[2]  # n3: two hops from n1 in a 4-ring
    for address in (far["node_address"], far["node_address_v4"]):
        # IPv4 follows IPv6 by a moment: its next hops are the cable /31s, added after the
        # neighbour is heard
        until(partial(ring.ping, ring.nodes[0], address), WAIT, f"n1 reaches n3 at {address}")


def test_babeld_outlives_a_kill_9_and_the_next_start_takes_over_cleanly(ring: Lab) -> None:
    """As on a Mac (no death signal): babblerd killed, its babeld runs on; the next babblerd
    ends it, starts one of its own, and nothing stale is left."""
    node = ring.nodes[1]
    before = babelds(ring, node)
    assert len(before) == 1
    assert node.pid is not None
    os.kill(node.pid, signal.SIGKILL)
    ring.daemons.reap(node.pid)
    assert babelds(ring, node) == before, "babeld died with babblerd: not as on a Mac"
    ring.start(node)
    until(
        lambda: len(babelds(ring, node)) == 1 and babelds(ring, node) != before,
        WAIT,
        "one new babeld",
    )
    ring.wait_reachable(WAIT)
    status = ring.status(node)
    ours = {a["address"] for a in status["addresses"]}
    held = ring.exec(node, "ip", "-6", "-o", "addr", "show", "scope", "global").stdout
    in_range = {w.split("/")[0] for w in held.split() if w.startswith("fde0:")}
    assert in_range == ours | {status["node_address"]}, "addresses left from before the kill"


def test_a_clean_stop_puts_the_macos_settings_back(netifaces_installed: None) -> None:
    lab = _lab("s", 2, "line", "macos")
    try:
        node = lab.nodes[0]

        def read() -> str:
            return lab.exec(node, "sysctl", "-n", "net.inet6.ip6.forwarding").stdout

        assert read() == "0\n"
        lab.start_all()
        lab.wait_reachable(WAIT)
        assert read() == "1\n"
        assert node.pid is not None
        os.kill(node.pid, signal.SIGTERM)
        assert lab.wait_exit(node, 15) == 0
        assert read() == "0\n"
        assert babelds(lab, node) == []
    finally:
        _taken_down(lab)


def test_a_new_mac_s_thunderbolt_bridge_is_named_by_the_doctor_and_taken_out(
    netifaces_installed: None,
) -> None:
    """From boot the ports are in bridge0 (no link-local: no mesh); the doctor fails naming
    them and the commands that take them out; those commands run; the mesh forms."""
    lab = _lab("b", 2, "line", "macos", bridged=True)
    try:
        lab.start_all()
        node = lab.nodes[0]
        doctor = lab.exec(node, "babblerctl", "doctor", "--json")
        assert doctor.returncode == 1
        [bridge] = [c for c in json.loads(doctor.stdout) if c["check"] == "thunderbolt bridge"]
        assert bridge["status"] == "fail" and "bridge0 holds en2" in bridge["saw"]
        for one in lab.nodes:
            for command in bridge["do"].split("; "):
                words = command.removeprefix("sudo ").replace('"Thunderbolt Bridge"', "TB")
                argv = [w if w != "TB" else "Thunderbolt Bridge" for w in words.split()]
                done = lab.exec(one, *argv)
                assert done.returncode == 0, f"{command}: {done.stderr}"
        lab.wait_reachable(WAIT)
        after = lab.exec(node, "babblerctl", "doctor", "--json")
        [bridge] = [c for c in json.loads(after.stdout) if c["check"] == "thunderbolt bridge"]
        assert bridge["status"] == "ok"
    finally:
        _taken_down(lab)


def test_a_mixed_ring_of_linux_and_macos_nodes_carries_both_families(
    netifaces_installed: None,
) -> None:
    lab = _lab("x", 4, "ring", "mixed")
    try:
        lab.start_all()
        lab.wait_reachable(WAIT)
        platforms = [lab.status(n)["platform"] for n in lab.nodes]
        assert platforms == ["linux", "macos", "linux", "macos"]
        for source, target in ((0, 2), (1, 3), (0, 1)):
            status = lab.status(lab.nodes[target])
            for address in (status["node_address"], status["node_address_v4"]):
                reached = partial(lab.ping, lab.nodes[source], address)
                until(reached, WAIT, f"n{source + 1} reaches n{target + 1} at {address}")
    finally:
        _taken_down(lab)


def commands_run(node: Node) -> list[str]:
    """The command lines the node's babblerd (and anyone) ran on its "Mac", in order."""
    log = (Path(node.base) / "macos-server.log").read_text().splitlines()
    return [line.split(" ", 1)[1] for line in log if line[:1].isdigit() and " " in line]


def test_a_settled_macos_node_changes_nothing_pass_after_pass(ring: Lab) -> None:
    """Once the mesh stands, a pass (one `ifconfig`, every 2 s) finds everything as wanted and
    acts on nothing: no address added or removed again, no MTU set again (it did, at every
    pass, while the lab's netifaces gave no IPv6 flags and the cable addresses looked
    preferred)."""
    node = ring.nodes[2]
    ring.wait_settled(node)
    mark = len(commands_run(node))
    until(lambda: commands_run(node)[mark:].count("ifconfig") >= 3, WAIT, "three passes")
    acts = [
        c
        for c in commands_run(node)[mark:]
        if " add" in c or "delete" in c or " mtu " in c or "alias" in c
    ]
    assert acts == [], f"a settled node acted: {acts}"
