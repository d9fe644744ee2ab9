"""One babblerd per network namespace: a second one, with the same or another run
directory, exits 1 with one line naming the first, and touches nothing of it."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.integration.helpers import WAIT, LabFactory, mesh_addresses, until
from tests.integration.watcher import Follower

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("run_dir", ["same", "other"])
def test_a_second_daemon_exits_with_one_line_and_touches_nothing(
    make_lab: LabFactory, run_dir: str
) -> None:
    lab = make_lab(2, "line")
    lab.wait_reachable(WAIT)
    n1 = lab.nodes[0]
    before = lab.status(n1)
    addresses = mesh_addresses(lab, 1)
    watcher = Follower(n1.socket)
    try:
        until(lambda: watcher.events("snapshot"), what="the watch's snapshot")
        heard = len(watcher.lines)
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
        time.sleep(1.0)  # give anything the second one did time to show
        after = lab.status(n1)
        assert mesh_addresses(lab, 1) == addresses
        assert after["babeld"]["pid"] == before["babeld"]["pid"]
        assert after["addresses"] == before["addresses"]
        new = [line for _, line in watcher.lines[heard:]]
        assert not any('"type":"addresses"' in line for line in new), new
        assert not watcher.closed.is_set()
    finally:
        watcher.close()
    assert subprocess.run(["kill", "-0", str(n1.pid)], check=False).returncode == 0
