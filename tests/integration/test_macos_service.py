"""`babblerd install-system-daemon` on the macOS lab (issue 35): two Macs cabled, each
installs babblerd as a LaunchDaemon with a mesh key through the lab's launchctl (it starts
the plist's program as launchd would), they mesh; a second install changes nothing; an
uninstall leaves no process, no plist and none of babblerd's addresses."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from babbler.client import ask
from babbler.lab import Lab, Node
from babbler.lab.macos import node as mac
from babbler.lab.processes import pids_in
from babbler.service import launchd
from tests import needs
from tests.integration.conftest import _print_logs
from tests.integration.helpers import WAIT, until

MACOS_CHECK = Path(__file__).parents[2] / "scripts" / "macos-check"


def root(node: Node) -> launchd.Paths:
    """Where install writes on this lab Mac (its BABBLER_MAC_ROOT)."""
    return launchd.Paths(Path(mac.environment(node)["BABBLER_MAC_ROOT"]))


@pytest.fixture(scope="module")
def macs() -> Iterator[Lab]:
    """Two lab Macs, one cable, no babblerd running (install starts it)."""
    needs.netifaces()
    lab = Lab.create(f"s{os.getpid() % 100000}", 2, "line", [], platform="macos")
    try:
        yield lab
    finally:
        for node in lab.nodes:  # babblerd's own log, where the lab's launchd wrote it
            log = root(node).log
            if log.exists():
                print(f"--- {node.name} {log}\n{log.read_text()[-4000:]}")
        _print_logs(lab)
        lab.down()
        left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert f"bbl-{lab.name}-" not in left, left


def run(lab: Lab, node: Node, *args: str) -> subprocess.CompletedProcess[str]:
    return lab.exec(node, *args, timeout=WAIT + 30)


def status(node: Node) -> dict[str, Any]:
    answer: dict[str, Any] = ask(root(node).socket, "status")
    return answer


def launchd_pid(lab: Lab, node: Node) -> int | None:
    """babblerd's pid as `launchctl print` says it."""
    printed = run(lab, node, "launchctl", "print", f"system/{launchd.LABEL}").stdout
    pids = [line.split(" = ")[1] for line in printed.splitlines() if line.startswith("\tpid = ")]
    return int(pids[0]) if pids else None


def others(node: Node) -> list[str]:
    """What runs in the node's namespace besides the lab's command server."""
    out = []
    for pid in pids_in(node.netns):
        if pid != node.helper_pid:
            with contextlib.suppress(OSError):  # gone meanwhile
                out.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode())
    return out


def alone(node: Node) -> bool:
    return others(node) == []


def mesh_addresses(node: Node) -> list[str]:
    """babblerd's addresses in the node's namespace (its node addresses on lo0, its cable
    addresses): every global IPv6 address and every IPv4 one but 127.0.0.1."""
    out = subprocess.run(
        ["ip", "-n", node.netns, "-o", "addr", "show"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found = []
    for line in out.splitlines():
        words = line.split()
        family, address = words[2], words[3]
        ours = ("127.",) if family == "inet" else ("fe80:", "::1/")
        if family in ("inet", "inet6") and not address.startswith(ours):
            found.append(address)
    return found


# Directories every Mac has: the lab's node may make them on the first install; they stay.
A_MACS = {"Library", "Library/LaunchDaemons", "etc", "var", "var/log", "var/run", "var/db"}


def listing(node: Node) -> set[tuple[str, str, int, int]]:
    """Everything under the lab Mac's root (its "/"): path, kind, mode and owner, as
    scripts/systemd-check's `listing` compares a host before and after."""
    top = root(node).root
    out = set()
    for path in top.rglob("*"):
        info = path.lstat()
        kind = "dir" if path.is_dir() and not path.is_symlink() else "file"
        out.add((str(path.relative_to(top)), kind, info.st_mode, info.st_uid))
    return out


def new_since(before: set[tuple[str, str, int, int]], node: Node) -> list[str]:
    """What is under the node's root now and was not before (or was, otherwise), but the
    directories every Mac has."""
    after = listing(node)
    assert before - after <= {entry for entry in before if entry[0] in A_MACS}, before - after
    return sorted(entry[0] for entry in after - before if entry[0] not in A_MACS)


def test_install_on_two_macs_meshes_and_uninstall_leaves_nothing(macs: Lab, tmp_path: Path) -> None:
    tree = {node.name: listing(node) for node in macs.nodes}  # as before install
    key = tmp_path / "mesh.key"
    made = subprocess.run(
        [str(Path(sys.executable).with_name("babblerctl")), "keygen", str(key)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    for node in macs.nodes:
        done = run(macs, node, "babblerd", "install-system-daemon", "--key-file", str(key))
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert f"wrote {root(node).plist}" in lines
        assert "started babblerd (launchctl bootstrap)" in lines
        assert any(line.startswith("node ") for line in lines)  # babblerctl status

    n1, n2 = macs.nodes
    until(lambda: any(peer["reachable"] for peer in status(n1)["nodes"]), WAIT, "n1 sees n2")
    first = status(n1)
    assert first["platform"] == "macos" and first["keyed"]
    far = status(n2)["node_address"]
    until(lambda: macs.ping(n1, far), WAIT, "n1 pings n2's node address")

    printed = run(macs, n1, "launchctl", "print", f"system/{launchd.LABEL}")
    assert printed.returncode == 0
    assert "\tstate = running\n" in printed.stdout
    # scripts/macos-check, as on a real Mac, reads launchd's print: babblerd runs under it
    check = run(
        macs,
        n1,
        "env",
        f"BABBLER_SOCKET={root(n1).socket}",
        str(MACOS_CHECK),
        "--yes",
        *("--ra-wait", "1", "--log", str(root(n1).log)),
    )
    assert any(
        line.startswith("launchd:") and line.split()[1] == "pass"
        for line in check.stdout.splitlines()
    ), check.stdout
    again = run(macs, n1, "babblerd", "install-system-daemon", "--key-file", str(key))
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[0] == "no change: babblerd is installed and running"
    shown = run(macs, n1, "babblerd", "system-daemon-status")
    assert shown.returncode == 0 and "running, version" in shown.stdout
    # a flag changed, as an upgrade changes the plist: babblerd restarted, same node
    before, pid = status(n1), launchd_pid(macs, n1)
    changed = run(
        macs, n1, "babblerd", "install-system-daemon", "--key-file", str(key), "--linger", "30"
    )
    assert changed.returncode == 0, changed.stderr
    lines = changed.stdout.splitlines()
    assert f"wrote {root(n1).config}" in lines
    assert "restarted babblerd (its files changed)" in lines
    after = status(n1)
    assert launchd_pid(macs, n1) not in (None, pid)
    assert (after["node_id"], after["node_address"]) == (before["node_id"], before["node_address"])

    for node in macs.nodes:
        done = run(macs, node, "babblerd", "uninstall-system-daemon")
        assert done.returncode == 0, done.stderr
        assert "stopped babblerd (launchctl bootout)" in done.stdout.splitlines()
        assert not root(node).plist.exists()
        assert not root(node).config.exists()
        assert (root(node).state_dir / "node-id").exists()  # kept: a reinstall keeps the id
        # the whole tree as before install, but the state dir (the node id)
        state = str(root(node).state_dir.relative_to(root(node).root))
        left = new_since(tree[node.name], node)
        assert left and all(path.startswith(state) for path in left), left
        assert mesh_addresses(node) == []
        # only the lab's command server runs there: no babblerd, no babeld, no responder
        # (a process on its way out may still be listed for a moment; none may stay)
        until(partial(alone, node), 10.0, f"{node.name}: {others(node)}")
        gone = run(macs, node, "launchctl", "print", f"system/{launchd.LABEL}")
        assert gone.returncode == 113
        shown = run(macs, node, "babblerd", "system-daemon-status")
        assert shown.returncode == 1
        assert shown.stdout.startswith("not installed (macos)")

    purged = run(macs, n1, "babblerd", "uninstall-system-daemon", "--purge")
    assert purged.returncode == 0, purged.stderr
    assert f"removed {root(n1).state_dir}" in purged.stdout.splitlines()
    assert not root(n1).state_dir.exists()
    assert not root(n1).config.parent.exists()  # empty after the uninstall: gone then
    assert new_since(tree[n1.name], n1) == []  # --purge: the tree as before install
