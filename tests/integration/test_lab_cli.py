"""babbler-lab as a newcomer uses it: up with a mesh key, status saying how many nodes each
reaches, exec running the lab's babblerctl even with a bare PATH (sudo resets it), --name
after the command, and down of a lab that is not up. Its files are root's: a lab directory
someone else made is refused."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from babbler.lab import LAB_ROOT
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
