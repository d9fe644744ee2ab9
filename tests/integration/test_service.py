"""babblerd as the systemd unit runs it: an unprivileged user with CAP_NET_ADMIN and
CAP_NET_RAW as ambient capabilities, babeld told to leave sysctls alone, forwarding set
beforehand (the unit's `ExecStartPre=+`). Real babeld in namespaces."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from babbler.lab import Lab, Node
from tests.integration.helpers import NOBODY, WAIT, LabFactory, as_nobody

pytestmark = pytest.mark.integration


def owned_by_nobody(node: Node) -> None:
    """What systemd's RuntimeDirectory=/StateDirectory= with User= would have made."""
    for directory in (node.run_dir, node.state_dir):
        directory.mkdir(parents=True, exist_ok=True)
        os.chown(directory, NOBODY, NOBODY)


def uid_of(pid: int) -> int:
    return Path(f"/proc/{pid}").stat().st_uid


def test_unprivileged_daemon_with_the_units_capabilities_routes_through(
    make_lab: LabFactory,
) -> None:
    lab: Lab = make_lab(3, "line", False)
    n1, n2, n3 = lab.nodes
    owned_by_nobody(n2)
    lab.exec(n2, "sh", "-c", "echo 1 > /proc/sys/net/ipv6/conf/all/forwarding", timeout=10)
    lab.start(n1)
    lab.start(n2, ["--skip-kernel-setup"], prefix=as_nobody("net_admin", "net_raw"))
    lab.start(n3)
    lab.wait_reachable(WAIT)  # n1 and n3 reach each other only through n2
    assert n2.pid is not None and uid_of(n2.pid) == NOBODY
    babeld = lab.status(n2)["babeld"]
    assert babeld["pid"] and uid_of(babeld["pid"]) == NOBODY
    assert (n2.state_dir / "node-id").stat().st_uid == NOBODY


def test_unprivileged_daemon_without_capabilities_says_what_it_lacks(
    make_lab: LabFactory,
) -> None:
    lab: Lab = make_lab(1, "line", False)
    node = lab.nodes[0]
    owned_by_nobody(node)
    result = subprocess.run(
        [*as_nobody("net_admin"), "babblerd", "--run-dir", str(node.run_dir)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"},
    )
    assert result.returncode == 1
    assert "must run as root or with CAP_NET_ADMIN and CAP_NET_RAW (missing CAP_NET_RAW)" in (
        result.stderr
    )
    assert not node.socket.exists()
