"""What a new user met with babbler-lab and the doctor on a lab (issue 34, item 6), through
the command line as they ran it: a name clash, `status` with a node down, the doctor in a
node whose babblerd crashed (its links, the settings and addresses the crash left), an
on-demand lab, and the demo, whose shown commands work when pasted."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from babbler.lab import Lab
from tests.integration.helpers import until

pytestmark = pytest.mark.integration

LAB = [sys.executable, "-m", "babbler.lab.cli"]


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "BABBLER_LAB"}
    return subprocess.run(
        [*LAB, *args], capture_output=True, text=True, timeout=180, check=False, cwd=cwd, env=env
    )


def test_a_clash_a_stopped_node_and_the_doctor_after_a_crash() -> None:
    name = f"w{os.getpid() % 100000}"
    try:
        up = run("--name", name, "up", "--nodes", "2", "--topology", "line", "--wait", "60")
        assert up.returncode == 0, up.stderr
        lines = up.stdout.splitlines()
        assert all(line.startswith(f"lab {name}: ") for line in lines), lines
        assert "s since babbler-lab started" in lines[0], lines[0]
        reached = next(line for line in lines if "every node reaches every other" in line)
        assert "s since babbler-lab started" in reached and "after every babblerd served" in reached

        again = run("--name", name, "up", "--nodes", "2")
        assert again.returncode == 1
        assert f"a lab named '{name}' is already up: pick another --name" in again.stderr
        assert run("--name", name, "status").returncode == 0  # the first one is still up

        n2 = Lab.load(name).node("n2")
        os.kill(n2.pid or 0, signal.SIGKILL)  # n2's babblerd crashes
        until(lambda: "n2  not running" in run("--name", name, "status").stdout, what="n2 down")
        status = run("--name", name, "status")
        assert status.returncode == 1, status.stdout
        assert "babblerd not running on n2" in status.stderr, status.stderr
        assert f"babbler-lab --name {name} start n2" in status.stderr, status.stderr
        alone = run("--name", name, "status", "n2")
        assert alone.returncode == 1 and alone.stderr == status.stderr, alone.stderr

        doctor = run("--name", name, "exec", "n2", "--", "babblerctl", "doctor")
        assert doctor.returncode == 1, doctor.stdout  # babblerd is not running: a failure
        said = {line.split()[1]: line for line in doctor.stdout.splitlines()}
        assert f"start it: babbler-lab --name {name} start n2" in said["babblerd"]
        # the veths are n2's links: not "no physical Ethernet or Thunderbolt link"
        assert said["links"].startswith("warn"), doctor.stdout
        assert "not checked: babblerd is not running" in said["links"], doctor.stdout
        # the settings the crash left, found without --state-dir, said in one short line
        assert "a crashed babblerd left" in said["leftovers"], doctor.stdout
        assert (
            "kernel settings changed"
            f" (sudo cat /run/babbler-lab/{name}/n2/state/sysctls lists them)"
        ) in said["leftovers"]
        assert len(said["leftovers"]) < 200 and "net." not in said["leftovers"]
        # and the addresses: with how to remove them
        left = said["leftover"]
        assert "a crashed babblerd left 2 mesh addresses, on lo and v2x1" in left, doctor.stdout
        assert "start babblerd: it removes them" in left and "sudo ip addr del fde0:" in left
        started = run("--name", name, "start", "n2")
        assert started.returncode == 0, started.stderr
        assert run("--name", name, "status").returncode == 0
    finally:
        run("--name", name, "down")


def test_an_on_demand_lab_says_it_idles_until_something_subscribes() -> None:
    name = f"d{os.getpid() % 100000}"
    try:
        up = run("--name", name, "up", "--nodes", "1", "--mode", "on-demand")
        assert up.returncode == 0, up.stderr
        assert "may still be forming" not in up.stdout, up.stdout
        assert (
            f"lab {name}: on demand: each node's mesh idles until something on that node "
            f"subscribes (`babbler-lab --name {name} exec NODE -- babblerctl watch`)"
        ) in up.stdout
    finally:
        run("--name", name, "down")


def test_the_demo_s_commands_work_pasted_and_its_picture_is_where_it_says(
    tmp_path: Path,
) -> None:
    name = f"m{os.getpid() % 100000}"
    helped = run("demo", "--help")
    assert "mesh.svg in the current directory" in " ".join(helped.stdout.split())
    try:
        demo = run("--name", name, "demo", "--nodes", "3", "--topology", "line", cwd=tmp_path)
        assert demo.returncode == 0, demo.stderr
        lines = demo.stdout.splitlines()
        assert not any(line.startswith("lab lab") for line in lines)
        assert f"wrote {tmp_path / 'mesh.svg'}" in lines and (tmp_path / "mesh.svg").exists()
        shown = [line[2:].partition("   #")[0] for line in lines if line.startswith("$ ")]
        assert len(shown) == 4, lines
        on_n1 = f"babbler-lab --name {name} exec n1 -- "
        assert all(command.startswith(on_n1) for command in shown), shown
        # Pasted into a shell while a lab of that name is up, each babblerctl one works.
        up = run("--name", name, "up", "--nodes", "3", "--topology", "line", "--wait", "60")
        assert up.returncode == 0, up.stderr
        (tmp_path / "mesh.svg").unlink()
        for command in (c for c in shown if " babblerctl " in c):
            words = shlex.split(command)
            assert words[0] == "babbler-lab"

            def works(words: list[str] = words) -> bool:
                return run(*words[1:]).returncode == 0

            until(works, what=command)  # once the node infos are in (the demo waited too)
        assert (tmp_path / "mesh.svg").exists()
    finally:
        run("--name", name, "down")
