"""babblerd as the systemd unit runs it: an unprivileged user with CAP_NET_ADMIN and
CAP_NET_RAW as ambient capabilities, nothing set beforehand: the daemon makes the kernel
setup itself (CAP_NET_ADMIN writes the namespace's net/ settings) and puts it back on stop;
the mesh key reaches it as systemd's credential while the key file stays root's, 0600.
Real babeld in namespaces."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from babbler.ctl.keygen import write_new_key
from babbler.lab import Lab, Node
from tests.integration.helpers import NOBODY, WAIT, LabFactory, as_nobody, sysctl

pytestmark = pytest.mark.integration


def owned_by_nobody(node: Node) -> None:
    """What systemd's RuntimeDirectory=/StateDirectory= with User= would have made."""
    for directory in (node.run_dir, node.state_dir):
        directory.mkdir(parents=True, exist_ok=True)
        os.chown(directory, NOBODY, NOBODY)


def uid_of(pid: int) -> int:
    return Path(f"/proc/{pid}").stat().st_uid


def credential(node: Node, key: Path) -> Path:
    """What LoadCredential=mesh.key:KEY makes: a copy only the service's user reads."""
    directory = node.run_dir / "credentials"
    directory.mkdir(mode=0o500)
    copy = directory / "mesh.key"
    copy.write_bytes(key.read_bytes())
    copy.chmod(0o400)
    for path in (copy, directory):
        os.chown(path, NOBODY, NOBODY)
    return directory


def test_unprivileged_daemon_with_the_units_capabilities_routes_through(
    make_lab: LabFactory, tmp_path: Path
) -> None:
    lab: Lab = make_lab(3, "line", False)
    n1, n2, n3 = lab.nodes
    key = tmp_path / "mesh.key"  # root's, 0600: as `babblerctl keygen` makes it
    write_new_key(key)
    owned_by_nobody(n2)
    forwarding = "net.ipv6.conf.all.forwarding"
    assert sysctl(lab, n2, forwarding) == "0"
    unit = as_nobody("net_admin", "net_raw")
    daemon = [sys.executable, "-m", "babbler.daemon.cli", "--run-dir", str(n2.run_dir)]
    refused = lab.exec(n2, *unit, *daemon, "--key-file", str(key))  # the key file itself
    assert refused.returncode == 2 and "Permission denied" in refused.stderr, refused.stderr
    lab.start(n1, ["--key-file", str(key)])
    passed = credential(n2, key)
    with pytest.MonkeyPatch.context() as env:  # systemd sets it for the service alone
        env.setenv("CREDENTIALS_DIRECTORY", str(passed))
        lab.start(n2, prefix=unit)
    lab.start(n3, ["--key-file", str(key)])
    lab.wait_reachable(WAIT)  # n1 and n3 reach each other only through n2
    assert n2.pid is not None and uid_of(n2.pid) == NOBODY
    status = lab.status(n2)
    assert status["keyed"] is True
    assert status["babeld"]["pid"] and uid_of(status["babeld"]["pid"]) == NOBODY
    assert (n2.state_dir / "node-id").stat().st_uid == NOBODY
    assert (
        sysctl(lab, n2, forwarding) == "1"
        and sysctl(lab, n2, "net.ipv6.conf.v2x1.accept_ra") == "0"
    )
    assert "lookup 96" in lab.exec(n2, "ip", "-6", "rule").stdout
    os.kill(n2.pid, signal.SIGTERM)
    lab.wait_exit(n2)
    assert (
        sysctl(lab, n2, forwarding) == "0"
        and sysctl(lab, n2, "net.ipv6.conf.v2x1.accept_ra") == "1"
    )
    assert "proto babel" not in lab.exec(n2, "ip", "-6", "rule").stdout


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
