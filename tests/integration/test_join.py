"""A node joining a mesh is routed to while its babblerd is still starting (issue 33 item 5):
the early start adds the node's addresses before it spawns babeld, so babeld announces them
from its first update, not 0.2-0.3 s later when the daemon has imported trio and pyroute2 and
read the kernel (docs/benchmarks.md "Join"). The joining babblerd is held (SIGSTOP) as soon
as its babeld runs (once the cable is usable, as on a machine already cabled); n1 must route
to its node address meanwhile (pings wait for the daemon's own host setup: the lookup rules
of babeld's table), and once it runs on, the daemon adopts that address instead of adding
it."""

from __future__ import annotations

import os
import signal
from ipaddress import IPv6Address

import pytest

from babbler.core.addressing import MESH_PREFIX
from babbler.daemon.spawn import process_name
from babbler.lab import Lab, Node
from babbler.lab.processes import in_netns
from tests.integration.helpers import WAIT, LabFactory, until

pytestmark = pytest.mark.integration


def babeld_runs(node: Node) -> bool:
    pids = (int(entry) for entry in os.listdir("/proc") if entry.isdigit())
    return any(process_name(p) == "babeld" and in_netns(p, node.netns) for p in pids)


def link_ready(lab: Lab, node: Node) -> bool:
    """The cable is usable (a settled link-local address): the early start takes it."""
    end = lab.end_name(node.index, 1)
    shown = lab.exec(node, "ip", "-6", "-o", "addr", "show", "dev", end, "scope", "link").stdout
    return "fe80:" in shown and "tentative" not in shown


def routed(lab: Lab, node: Node, address: str) -> bool:
    """babeld installed a route to `address` in the node's kernel (any table)."""
    shown = lab.exec(node, "ip", "-6", "route", "show", "table", "all", "proto", "babel").stdout
    return any(line.split()[0] == address for line in shown.splitlines() if line.strip())


def node_address(lab: Lab, node: Node) -> str | None:
    """The mesh address on the node's loopback (its node address), if any yet."""
    shown = lab.exec(node, "ip", "-6", "-o", "addr", "show", "dev", "lo").stdout.split()
    found = [w.split("/")[0] for w in shown if "/" in w and ":" in w]
    return next((a for a in found if IPv6Address(a) in MESH_PREFIX), None)


def test_a_joining_node_is_routed_to_before_its_babblerd_has_started(
    make_lab: LabFactory,
) -> None:
    lab = make_lab(2, "line", start=False)
    n1, n2 = lab.nodes
    lab.spawn(n1)
    lab.wait_served(n1)
    until(lambda: link_ready(lab, n2), what="n2's cable up with its link-local address")
    lab.spawn(n2)
    until(lambda: babeld_runs(n2), what="n2's babeld started early")
    assert n2.pid is not None
    os.kill(n2.pid, signal.SIGSTOP)  # n2's babblerd: no further than its early start
    try:
        address = node_address(lab, n2)
        assert address is not None, "n2 has no node address while its babblerd starts"
        until(lambda: routed(lab, n1, address), WAIT, f"n1's kernel routes to {address}")
    finally:
        os.kill(n2.pid, signal.SIGCONT)
    lab.wait_served(n2)
    assert lab.status(n2)["node_address"] == address
    said = [line for line in n2.log.read_text().splitlines() if "address added" in line]
    assert not any(address in line for line in said), said  # adopted, not added again
