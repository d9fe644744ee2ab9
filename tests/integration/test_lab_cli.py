"""babbler-lab as a newcomer uses it: up with a mesh key, status saying how many nodes each
reaches, exec running the lab's babblerctl even with a bare PATH (sudo resets it), --name
after the command, and down of a lab that is not up. Its files are root's: a lab directory
someone else made is refused. A macOS lab: a cable added later is described as the lab's
others are."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from babbler.lab import LAB_ROOT, Lab
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
