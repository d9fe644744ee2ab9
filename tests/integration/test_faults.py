"""Faults a long-running node meets: babeld killed again and again, babblerd killed, node ids
that collide through a copied state file, a state directory that cannot be written. Real
babblerd and babeld in namespaces. Recovery times are printed (pytest -s) for
docs/reliability.md."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from babbler.core.addressing import node_range
from babbler.core.fence import TABLE
from babbler.daemon.spawn import BACKGROUND_NICE, ROUTING_NICE
from babbler.lab import Lab, Node
from babbler.lab.processes import alive as _alive
from tests.integration.helpers import WAIT, LabFactory, mesh_addresses, until
from tests.integration.watcher import Follower

pytestmark = pytest.mark.integration


def babel_routes(lab: Lab, node: Node) -> list[str]:
    out = lab.exec(node, "ip", "-6", "route", "show", "table", str(TABLE), "proto", "babel").stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def niced(pid: int, nice: int) -> bool:
    """The process at `nice`, its session's autogroup too where the kernel has one."""
    autogroup = Path(f"/proc/{pid}/autogroup")
    shares = autogroup.read_text().split()[-1] if autogroup.exists() else str(nice)
    return os.getpriority(os.PRIO_PROCESS, pid) == nice == int(shares)


def test_babeld_killed_ten_times_in_a_row_comes_back_every_time(make_lab: LabFactory) -> None:
    lab = make_lab(3, "line")
    lab.wait_reachable(WAIT)
    middle = lab.nodes[1]
    watcher = Follower(middle.socket, "watch")
    took = []
    try:
        for kill in range(1, 11):
            pid = lab.status(middle)["babeld"]["pid"]
            killed_at = time.monotonic()
            os.kill(pid, signal.SIGKILL)

            def back(kill: int = kill, pid: int = pid) -> bool:
                status = lab.status(middle)
                babeld = status["babeld"]
                return (
                    status["mesh"] == "running"
                    and babeld["restarts"] == kill
                    and babeld["pid"] not in (None, pid)
                )

            until(back, timeout=WAIT, what=f"babeld back after kill {kill}")
            took.append(time.monotonic() - killed_at)
        lab.wait_reachable(WAIT)  # n1 <-> n3 through the 11th babeld
        routes = babel_routes(lab, middle)
        assert routes and not [r for r, n in Counter(routes).items() if n > 1], routes
        # Each back-off wait is longer than the one before it (no stable period in between).
        assert took[-1] > took[0]
        # The watcher saw every outage as events and was never cut off.
        pids = {e["babeld"]["pid"] for e in watcher.events("babeld") if e["babeld"]["pid"]}
        assert len(pids) >= 10
        states = [e["mesh"] for e in watcher.events("mesh")]
        assert states.count("running") >= 10 and "restarting" in states
        assert not watcher.closed.is_set()
    finally:
        watcher.close()
    print("\nbabeld SIGKILL -> running again, s:", " ".join(f"{t:.2f}" for t in took))


def test_babblerd_killed_leaves_no_babeld_within_3_s_and_the_next_start_cleans_up(
    make_lab: LabFactory,
) -> None:
    lab = make_lab(2, "line")
    lab.wait_reachable(WAIT)
    n1 = lab.nodes[0]
    before = lab.status(n1)
    babeld = before["babeld"]["pid"]
    assert n1.pid is not None
    # in a session of its own (the kernel's autogroup: babblerd's work does not make its
    # hellos late), and still tied to babblerd
    assert os.getsid(babeld) == babeld != os.getsid(n1.pid)
    assert niced(babeld, ROUTING_NICE)  # started early: ahead of babblerd's start-up
    responder = json.loads((n1.run_dir / "private" / "responder.pid").read_text())["pid"]
    assert niced(responder, BACKGROUND_NICE)  # the bench responder: behind everything
    killed_at = time.monotonic()
    os.kill(n1.pid, signal.SIGKILL)
    lab.wait_exit(n1)
    until(lambda: not _alive(babeld, "babeld"), timeout=3, what="babeld gone within 3 s")
    gone = time.monotonic() - killed_at
    private = n1.run_dir / "private"
    assert n1.socket.exists() and (private / "babeld.pid").exists()  # left by SIGKILL
    restart = time.monotonic()
    lab.start(n1)
    until(lambda: lab.status(n1)["mesh"] == "running", what="babeld running again")
    after = lab.status(n1)
    assert after["node_id"] == before["node_id"] and after["node_id_source"] == "file"
    assert int((private / "babeld.pid").read_text()) == after["babeld"]["pid"] != babeld
    assert niced(after["babeld"]["pid"], ROUTING_NICE)  # the daemon's start, after leftovers
    lab.wait_reachable(WAIT)
    took = time.monotonic() - restart
    assert lab.status(n1)["addresses"] == before["addresses"]
    print(f"\nbabblerd SIGKILL: babeld gone after {gone:.2f} s; restart to reachable {took:.2f} s")


@pytest.mark.parametrize("shared_by", ["flag", "state file"])
def test_same_node_id_on_two_nodes_is_detected_and_one_re_rolls(
    make_lab: LabFactory, shared_by: str
) -> None:
    shared = "a1b2c3d4e5f6"
    if shared_by == "flag":
        lab = make_lab(2, "line", False, "--node-id", shared)
    else:  # one machine's state dir copied to another (a cloned disk image)
        lab = make_lab(2, "line", False)
        for node in lab.nodes:
            node.state_dir.mkdir(parents=True, exist_ok=True)
            (node.state_dir / "node-id").write_text(f"{shared}\n")
    lab.start_all()
    assert {lab.status(n)["node_id"] for n in lab.nodes} == {shared}
    started = time.monotonic()
    until(
        lambda: {lab.status(n)["node_id"] for n in lab.nodes} != {shared},
        what="one node re-rolled",
    )
    moved = [n for n in lab.nodes if lab.status(n)["node_id"] != shared]
    assert len(moved) == 1
    new_id = lab.status(moved[0])["node_id"]
    assert lab.status(moved[0])["node_id_source"] == "rerolled"
    assert (moved[0].state_dir / "node-id").read_text() == f"{new_id}\n"
    lab.wait_reachable(WAIT)
    print(f"\n{shared_by} collision resolved and reachable in {time.monotonic() - started:.2f} s")
    assert all(a in node_range(int(new_id, 16)) for a in mesh_addresses(lab, moved[0].index))


@pytest.fixture
def small_mounts(tmp_path: Path) -> Iterator[dict[str, Path]]:
    """A read-only and a full filesystem (tiny tmpfs mounts), unmounted afterwards."""
    read_only, full = tmp_path / "ro", tmp_path / "full"
    mounted = []
    try:
        for path, options in ((read_only, "ro,size=64k"), (full, "size=64k")):
            path.mkdir()
            subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], check=True)
            mounted.append(path)
        (full / "state").mkdir(mode=0o700)
        subprocess.run(
            ["dd", "if=/dev/zero", f"of={full / 'filler'}", "bs=4k"],
            capture_output=True,
            check=False,  # ends with "No space left on device", as intended
        )
        yield {"read-only": read_only / "state", "full": full / "state"}
    finally:
        for path in mounted:
            subprocess.run(["umount", "-l", str(path)], check=False)


@pytest.mark.parametrize("kind", ["read-only", "full"])
def test_unwritable_state_dir_keeps_the_mesh_running_and_says_so(
    make_lab: LabFactory, small_mounts: dict[str, Path], kind: str
) -> None:
    lab = make_lab(2, "line", False)
    n1, n2 = lab.nodes
    lab.start(n1)
    lab.start(n2, ["--state-dir", str(small_mounts[kind])])
    lab.wait_reachable(WAIT)
    status = lab.status(n2)
    assert status["node_id_source"] == "generated"
    error = status["node_id_persist_error"]
    assert error and ("Read-only" in error or "No space" in error or "cannot create" in error)
    assert "could not persist node id" in n2.log.read_text()


def test_babeld_that_cannot_start_is_retried_reported_and_logged_once_per_attempt(
    make_lab: LabFactory,
) -> None:
    lab = make_lab(2, "line", False)
    node = lab.nodes[0]
    lab.start(node, ["--babeld", "/bin/false"])  # exits 1 at once, every time
    until(lambda: lab.status(node)["babeld"]["restarts"] >= 4, what="four failed attempts")
    status = lab.status(node)
    assert status["mesh"] in ("restarting", "starting")
    assert "babeld exited with status 1" in status["babeld"]["last_error"]
    restarts = status["babeld"]["restarts"]
    failed = node.log.read_text().count('"event": "babeld failed"')
    assert failed in (restarts, restarts + 1)  # one line per attempt (one may be in flight)
    assert lab.status(node)["addresses"]  # the node keeps serving and holds its addresses
