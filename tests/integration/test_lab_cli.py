"""babbler-lab as a newcomer uses it: up with a mesh key, status saying how many nodes each
reaches, exec running the lab's babblerctl even with a bare PATH (sudo resets it), --name
after the command, and down of a lab that is not up."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

LAB = [sys.executable, "-m", "babbler.lab.cli"]
CTL = [sys.executable, "-m", "babbler.ctl.main"]


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*LAB, *args], capture_output=True, text=True, timeout=120, check=False, env=env
    )


def test_a_newcomer_s_lab(tmp_path: Path) -> None:
    name = f"c{os.getpid() % 100000}"
    key = tmp_path / "keys" / "mesh.key"
    made = subprocess.run([*CTL, "keygen", str(key)], capture_output=True, text=True, check=False)
    assert made.returncode == 0, made.stderr
    try:
        up = run("up", "--name", name, "--nodes", "2", "--topology", "line", "--key-file",
                 str(key), "--wait", "60")  # fmt: skip
        assert up.returncode == 0, up.stderr
        assert f"logs in /tmp/babbler-lab/{name}/n*/babblerd.log" in up.stdout, up.stdout
        status = run("--name", name, "status")
        assert status.stdout.count("reaches 1 of 1 nodes") == 2, status.stdout
        bare = {"PATH": "/usr/bin:/bin"}  # what sudo leaves
        ip = run("exec", "n1", "--name", name, "--", "babblerctl", "status", "--json", env=bare)
        assert ip.returncode == 0 and '"keyed": true' in ip.stdout, ip.stderr
    finally:
        down = run("down", "--name", name)
    assert down.returncode == 0 and down.stdout.strip() == f"lab {name}: down", down.stderr
    again = run("down", "--name", name)
    assert again.returncode == 0 and "not up" in again.stdout, again.stderr
