"""babbler-lab as a newcomer uses it: up with a mesh key, status saying how many nodes each
reaches, exec running the lab's babblerctl even with a bare PATH (sudo resets it), --name
after the command, and down of a lab that is not up. Its files are root's: a lab directory
someone else made is refused. A macOS lab: a cable added later is described as the lab's
others are, and what a killed babblerd left running goes with `stop` and `down`."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from babbler.core.config import DEFAULT_BENCH_PORT
from babbler.lab import LAB_ROOT, Lab
from babbler.lab.processes import NETNS_DIR, RESPONDER
from tests import needs
from tests.integration.helpers import NOBODY, until

pytestmark = pytest.mark.integration

LAB = [sys.executable, "-m", "babbler.lab.cli"]
CTL = [sys.executable, "-m", "babbler.ctl.main"]


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*LAB, *args], capture_output=True, text=True, timeout=120, check=False, env=env
    )


def each_reaches_the_other(name: str) -> bool:
    """What `status` says of a 2-node lab once node info is in (a moment after the first
    ping: `up --wait` waits for pings)."""
    return run("--name", name, "status").stdout.count("reaches 1 of 1 nodes") == 2


def test_a_newcomer_s_lab(tmp_path: Path) -> None:
    name = f"c{os.getpid() % 100000}"
    key = tmp_path / "keys" / "mesh.key"
    made = subprocess.run([*CTL, "keygen", str(key)], capture_output=True, text=True, check=False)
    assert made.returncode == 0, made.stderr
    try:
        up = run("up", "--name", name, "--nodes", "2", "--topology", "line", "--key-file",
                 str(key), "--wait", "60")  # fmt: skip
        assert up.returncode == 0, up.stderr
        assert f"logs in /run/babbler-lab/{name}/n*/babblerd.log" in up.stdout, up.stdout
        until(lambda: each_reaches_the_other(name), what="status: each reaches 1 of 1 nodes")
        bare = {"PATH": "/usr/bin:/bin"}  # what sudo leaves
        ip = run("exec", "n1", "--name", name, "--", "babblerctl", "status", "--json", env=bare)
        assert ip.returncode == 0 and '"keyed": true' in ip.stdout, ip.stderr
    finally:
        down = run("down", "--name", name)
    assert down.returncode == 0 and down.stdout.strip() == f"lab {name}: down", down.stderr
    again = run("down", "--name", name)
    assert again.returncode == 0 and "not up" in again.stdout, again.stderr


def test_a_lab_directory_someone_else_made_is_refused() -> None:
    name = f"o{os.getpid() % 100000}"
    base = LAB_ROOT / name
    LAB_ROOT.mkdir(mode=0o755, exist_ok=True)
    base.mkdir()
    os.chown(base, NOBODY, NOBODY)  # made before the lab, as anyone could in /tmp
    try:
        up = run("up", "--name", name, "--nodes", "1")
        assert up.returncode == 1
        assert up.stderr.splitlines() == [
            f"babbler-lab: refusing {base}: it is owned by uid {NOBODY}, not root, so someone "
            "else could redirect the lab's files; remove it or fix its owner and mode"
        ]
        left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert f"bbl-{name}-" not in left and os.listdir(base) == []
    finally:
        run("down", "--name", name)  # had it come up
        shutil.rmtree(base, ignore_errors=True)


def test_nodes_stopped_started_and_cables_pulled_through_the_lab_and_down_ends_all() -> None:
    """What people did by hand with `exec` (and `down` then left running): a node's babblerd
    stopped, started, restarted; a cable pulled out and plugged back; and a babblerd started
    by hand inside a node, which `down` ends too (else it starts babeld again once its
    namespace is gone)."""
    name = f"p{os.getpid() % 100000}"
    by_hand: subprocess.Popen[bytes] | None = None
    try:
        assert run("up", "--name", name, "--nodes", "2", "--topology", "line").returncode == 0
        until(lambda: each_reaches_the_other(name), what="the mesh")
        assert run("--name", name, "stop", "n2").returncode == 0
        assert "n2  not running" in run("--name", name, "status").stdout
        assert run("--name", name, "start", "n2").returncode == 0
        until(lambda: each_reaches_the_other(name), what="the mesh again after a start")
        assert run("--name", name, "restart", "n1").returncode == 0
        until(lambda: each_reaches_the_other(name), what="the mesh again after a restart")
        pulled = run("--name", name, "unplug", "n1", "n2")
        assert pulled.stdout.strip() == f"lab {name}: the cable n1-n2 pulled out", pulled.stderr
        down = run("--name", name, "exec", "n1", "--", "ip", "-br", "link", "show", "v1x2")
        assert " DOWN " in down.stdout, down.stdout
        assert run("--name", name, "plug", "n2", "n1").returncode == 0
        until(lambda: each_reaches_the_other(name), what="the mesh again after a plug")
        missing = run("--name", name, "unplug", "n1", "n1")
        assert missing.returncode == 1 and "no cable between n1 and n1" in missing.stderr
        assert run("--name", name, "stop", "n2").returncode == 0
        base = f"/run/babbler-lab/{name}/n2"
        hand = [*LAB, "--name", name, "exec", "n2", "--", "babblerd", "--run-dir", f"{base}/h",
                "--state-dir", f"{base}/hs", "--interface", "v*"]  # fmt: skip
        by_hand = subprocess.Popen(hand, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        until(lambda: os.path.exists(f"{base}/h/babblerd.sock"), what="the hand-started one")
    finally:
        run("down", "--name", name)
    assert by_hand is not None and by_hand.wait(15) is not None, "down left it running"


def thunderbolt_buses(name: str, node: str) -> list[dict[str, Any]]:
    """What `system_profiler SPThunderboltDataType -json` says on a macOS node: its buses."""
    shown = run("--name", name, "exec", node, "--", "system_profiler", "SPThunderboltDataType",
                "-json")  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    buses: list[dict[str, Any]] = json.loads(shown.stdout)["SPThunderboltDataType"]
    return buses


def test_a_cable_added_later_is_described_at_the_lab_s_thunderbolt_with_its_far_mac() -> None:
    """`up --thunderbolt 5`, then a second cable between the same two Macs: both buses of
    each say 80 Gb/s and name the other Mac's domain (they said 40 Gb/s, the new one as if
    nothing were at its far end: the speed was known only to `up`, far ends only of the
    first cable set)."""
    needs.netifaces()
    name = f"tb{os.getpid() % 100000}"
    try:
        up = run("up", "--name", name, "--nodes", "2", "--topology", "line", "--platform",
                 "macos", "--thunderbolt", "5")  # fmt: skip
        assert up.returncode == 0, up.stderr
        Lab.load(name).add_link(1, 2, prefix="vb")  # en3 at both ends
        for here, there in (("n1", "n2"), ("n2", "n1")):
            far_domain = {bus["domain_uuid_key"] for bus in thunderbolt_buses(name, there)}
            assert len(far_domain) == 1, far_domain  # a Mac has one domain
            buses = thunderbolt_buses(name, here)
            assert len(buses) == 2, buses
            for bus in buses:
                assert bus["receptacle_1_tag"]["current_speed_key"] == "80 Gb/s", bus
                assert [far["domain_uuid_key"] for far in bus.get("_items", [])] == [*far_domain], (
                    bus
                )
    finally:
        run("down", "--name", name)


def lab_processes(namespaces: set[tuple[int, int]]) -> dict[int, str]:
    """pid -> command line of every process whose network namespace is one of these (held
    by identity, so a process left in one deleted since is found too)."""
    out = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            net = os.stat(f"/proc/{entry}/ns/net")
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue  # it has gone
        if (net.st_dev, net.st_ino) in namespaces:
            out[int(entry)] = cmdline
    return out


def listening(name: str, node: str) -> int:
    """How many sockets listen on the bench port in the node (its responder's: one per
    node address, IPv6 and IPv4)."""
    shown = run("--name", name, "exec", node, "--", "ss", "-Hltn", f"sport = :{DEFAULT_BENCH_PORT}")
    return len(shown.stdout.splitlines())


def test_what_a_killed_macos_babblerd_left_goes_with_stop_and_down() -> None:
    """A Mac's babblerd children are not tied to it: killed, it leaves its bench responder
    running. `stop` ends it (else it holds the port the next babblerd's responder needs),
    and `down` leaves no process of the lab anywhere (else they run on in namespaces
    deleted under them)."""
    needs.netifaces()
    name = f"kd{os.getpid() % 100000}"
    namespaces: set[tuple[int, int]] = set()
    try:
        up = run("up", "--name", name, "--nodes", "2", "--topology", "line", "--platform",
                 "macos")  # fmt: skip
        assert up.returncode == 0, up.stderr
        lab = Lab.load(name)
        node_of = {}
        for node in lab.nodes:
            found = os.stat(NETNS_DIR / node.netns)
            node_of[node.name] = (found.st_dev, found.st_ino)
        namespaces = set(node_of.values())

        def running(node: str, marker: str) -> list[int]:
            found = lab_processes({node_of[node]}).items()
            return [pid for pid, cmdline in found if marker in cmdline]

        # Each responder on both node addresses: one that binds after its babblerd died
        # exits, on its word that it did (a pipe no one reads)
        until(lambda: listening(name, "n1") == listening(name, "n2") == 2, what="responders")
        os.kill(lab.node("n1").pid or 0, signal.SIGKILL)
        until(lambda: not running("n1", "babbler.daemon.cli"), what="n1's babblerd gone")
        assert running("n1", RESPONDER), "n1's responder died with its babblerd (as on Linux)"
        stopped = run("--name", name, "stop", "n1")
        assert stopped.returncode == 0, stopped.stderr
        assert running("n1", RESPONDER) == [], "stop left the killed babblerd's responder"
        os.kill(lab.node("n2").pid or 0, signal.SIGKILL)
        down = run("down", "--name", name)
        assert down.returncode == 0, down.stderr
        left = lab_processes(namespaces)
        assert left == {}, f"down left processes of the lab running: {left}"
    finally:
        run("down", "--name", name)
        for pid in lab_processes(namespaces):  # the lab's own, were any left
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


# A stand-in for a daemon whose children outlive it (a Mac's babblerd): ended, it starts
# another child first, as babblerd restarting its responder while it stops would.
RESTARTS_WHEN_ENDED = """
import os, signal, subprocess, sys, time
def restart(*_):
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    os._exit(0)
signal.signal(signal.SIGTERM, restart)
print("ready", flush=True)
time.sleep(600)
"""


def test_down_ends_what_starts_in_a_namespace_while_it_ends() -> None:
    name = f"rs{os.getpid() % 100000}"
    lab = Lab.create(name, 1, "line", [])
    found = os.stat(NETNS_DIR / lab.nodes[0].netns)
    namespace = {(found.st_dev, found.st_ino)}
    try:
        where = ["ip", "netns", "exec", lab.nodes[0].netns]
        program = [*where, sys.executable, "-c", RESTARTS_WHEN_ENDED]
        with subprocess.Popen(program, stdout=subprocess.PIPE, text=True) as started:
            assert started.stdout is not None and started.stdout.readline() == "ready\n"
            down = run("down", "--name", name)
            assert down.returncode == 0, down.stderr
            left = lab_processes(namespace)
            assert left == {}, f"down left what started while it ended: {left}"
            assert started.wait(15) == 0
    finally:
        run("down", "--name", name)
        for pid in lab_processes(namespace):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
