"""One babblerd per network namespace: a second one, with the same or another run
directory, exits 1 with one line naming the first, and touches nothing of it."""

from __future__ import annotations

import json
import subprocess
import sys
from functools import partial

import pytest

from babbler.lab import Lab, Node
from tests.integration.helpers import WAIT, LabFactory, mesh_addresses, until
from tests.integration.watcher import Follower

pytestmark = pytest.mark.integration

# The marker's MTU, set on a node's link for a moment: any size but its own that IPv6 takes
# (1280 and up) and that babeld's small packets fit.
MARK_MTU = 1400


def reconciled(lab: Lab, node: Node) -> None:
    """Until the node's daemon has run a whole reconcile that began after this call: change
    its link's MTU (a kernel event after anything done before the call), wait for `status`
    to show it (a reconcile began: it re-reads everything and acts on all it finds), then
    put it back and wait again (read again: that reconcile has done all, published too)."""
    [link] = lab.status(node)["interfaces"]
    name, own = link["name"], link["mtu"]
    assert own != MARK_MTU

    def shown(size: int) -> bool:
        return bool(lab.status(node)["interfaces"][0]["mtu"] == size)

    for size in (MARK_MTU, own):
        result = lab.exec(node, "ip", "link", "set", "dev", name, "mtu", str(size))
        assert result.returncode == 0, result.stderr
        until(partial(shown, size), what=f"status showing {name}'s MTU {size}")


def repairs(log: bytes) -> list[str]:
    """What a daemon's JSON log says it did to addresses: a reconcile mending them logs
    each, though its `watch` clients see no change (the view is the same at its end)."""
    events = (json.loads(line) for line in log.splitlines() if line.startswith(b"{"))
    return [e["event"] for e in events if e.get("event", "").startswith("address ")]


@pytest.mark.parametrize("run_dir", ["same", "other"])
def test_a_second_daemon_exits_with_one_line_and_touches_nothing(
    make_lab: LabFactory, run_dir: str
) -> None:
    lab = make_lab(2, "line")
    lab.wait_reachable(WAIT)
    n1 = lab.nodes[0]
    # Settled: the cable address comes once babeld has the neighbour, after the pings can.
    until(lambda: lab.status(n1)["addresses_v4"], what="n1's cable address")
    before = lab.status(n1)
    addresses = mesh_addresses(lab, 1)
    watcher = Follower(n1.socket)
    try:
        until(lambda: watcher.events("snapshot"), what="the watch's snapshot")
        heard, logged = len(watcher.lines), n1.log.stat().st_size
        base = n1.run_dir if run_dir == "same" else n1.run_dir.parent / "second"
        state = n1.state_dir if run_dir == "same" else n1.run_dir.parent / "second-state"
        second = lab.exec(
            n1,
            *(sys.executable, "-m", "babbler.daemon.cli", "--interface", "v*", "--mode", "always"),
            *("--run-dir", str(base), "--state-dir", str(state)),
        )
        assert second.returncode == 1
        assert second.stderr.splitlines() == [
            f"babblerd: babblerd already runs in this network namespace (pid {n1.pid}); "
            "one per namespace"
        ]
        assert second.stdout == ""
        if run_dir == "other":
            assert not base.exists() and not state.exists()
        reconciled(lab, n1)  # what the second one did, if anything, shows by now
        after = lab.status(n1)
        assert mesh_addresses(lab, 1) == addresses
        assert after["babeld"]["pid"] == before["babeld"]["pid"]
        assert after["addresses"] == before["addresses"]
        new = [line for _, line in watcher.lines[heard:]]
        assert not any('"type":"addresses"' in line for line in new), new
        assert not watcher.closed.is_set()
        assert repairs(n1.log.read_bytes()[logged:]) == [], "the running daemon mended"
    finally:
        watcher.close()
    assert subprocess.run(["kill", "-0", str(n1.pid)], check=False).returncode == 0
