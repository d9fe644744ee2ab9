"""A node is one machine: its node address survives a pulled cable, its identity survives
babeld crashes, and the header's my-id is always babeld's real router id."""

from __future__ import annotations

import os
import signal
import socket
import sys
import time

import pytest

from babbler.lab import Node
from tests.integration.helpers import WAIT, LabFactory, mesh_addresses, until
from tests.integration.watcher import Follower

pytestmark = pytest.mark.integration
ZEROS = "00:00:00:00:00:00:00:00"
KILLS = 20
# babeld is killed in bursts that share one hold: a burst's echoes (each lives up to 16 s at
# the neighbours) are all out there together while the node waits out HOLD. Five kills in a
# row back babeld's restarts off by 0.1 + ... + 1.6 s; a longer burst would pay 3.2 s more.
BURST = 5
# Longer than the collision hold (collision.MIN_HOLD, 5 s), when an echo taken for another
# node would re-roll the node id, and than the stable run that resets babeld's back-off
# (mesh.MeshTunables.stable_period, 5 s).
HOLD = 5.5


def header_my_id(node: Node) -> str:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(str(node.socket))
        data = b""
        while not data.endswith(b"\nok\n"):
            chunk = sock.recv(4096)
            assert chunk, data
            data += chunk
    (line,) = [x for x in data.decode().splitlines() if x.startswith("my-id ")]
    return line.removeprefix("my-id ")


def test_the_node_address_stays_reachable_when_one_of_its_links_goes(
    make_lab: LabFactory,
) -> None:
    lab = make_lab(4, "ring")
    lab.wait_reachable(WAIT)
    n1, n3 = lab.nodes[0], lab.nodes[2]
    node_address = lab.status(n1)["node_address"]
    shown = lab.exec(n1, sys.executable, "-m", "babbler.ctl.main", "--socket", str(n1.socket), "ip")
    assert shown.stdout.strip() == node_address, shown.stderr
    assert lab.ping(n3, node_address)
    link_address = next(a for a in lab.status(n1)["addresses"] if a["interface"] == "v1x2")
    assert lab.exec(n1, "ip", "link", "del", "v1x2").returncode == 0
    until(lambda: lab.ping(n3, node_address), what="node address reachable around the ring")
    assert not lab.ping(n3, link_address["address"], wait=0.5)  # that link's address went
    assert str(node_address) in {str(a) for a in mesh_addresses(lab, 1)}


def test_twenty_babeld_crashes_never_change_the_node_id_or_addresses(
    make_lab: LabFactory,
) -> None:
    lab = make_lab(4, "ring")
    lab.wait_reachable(WAIT)
    n1, n3 = lab.nodes[0], lab.nodes[2]
    before = lab.status(n1)
    watcher = Follower(n1.socket)
    seen_ids = set()
    try:
        for kill in range(KILLS):
            if kill % BURST == 0 and kill:
                time.sleep(HOLD)  # echoes of the burst's router ids have had their chance
            pid = lab.status(n1)["babeld"]["pid"]
            os.kill(pid, signal.SIGKILL)

            def restarted(old: int = pid) -> bool:
                now = lab.status(n1)
                return now["mesh"] == "running" and now["babeld"]["pid"] not in (None, old)

            until(restarted, what="babeld running again")
            now = lab.status(n1)
            seen_ids.add(now["babeld"]["my_id"])
            assert header_my_id(n1) == now["babeld"]["my_id"]
            assert now["node_id"] == before["node_id"]
            assert now["addresses"] == before["addresses"]
        time.sleep(HOLD)
        assert lab.status(n1)["node_id"] == before["node_id"]
        until(lambda: lab.ping(n3, before["node_address"]), what="reachable after the crashes")
        assert watcher.events("node_id") == [], "the node id changed"
        assert not watcher.closed.is_set()
        assert len(seen_ids) == KILLS  # a fresh router id for every babeld
    finally:
        watcher.close()


def test_my_id_is_never_zeros_and_is_the_id_babeld_then_uses(make_lab: LabFactory) -> None:
    lab = make_lab(2, "line", False)
    lab.start_all()
    n1 = lab.nodes[0]
    until(lambda: lab.status(n1)["mesh"] == "running")
    running = lab.status(n1)["babeld"]["my_id"]
    assert header_my_id(n1) == running != ZEROS
    # An idle on-demand node: the id its next babeld will take.
    n2 = lab.nodes[1]
    assert n2.pid is not None
    os.kill(n2.pid, signal.SIGTERM)
    lab.wait_exit(n2)
    lab.start(n2, ["--mode", "on-demand"])
    idle = lab.status(n2)
    assert idle["mesh"] == "idle"
    promised = header_my_id(n2)
    assert promised == idle["babeld"]["my_id"] != ZEROS
    watcher = Follower(n2.socket)
    try:
        until(lambda: lab.status(n2)["mesh"] == "running", what="on-demand mesh started")
        assert lab.status(n2)["babeld"]["my_id"] == promised
        assert header_my_id(n2) == promised
    finally:
        watcher.close()
