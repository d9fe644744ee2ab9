"""Who can do what: file modes and owners, planted symlinks, and an unprivileged client.
Real babblerd and babeld in namespaces (docs/security.md has the threat model)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from babbler.lab import Lab
from tests.integration.helpers import WAIT, LabFactory, as_nobody

pytestmark = pytest.mark.integration


def mode_and_owner(path: Path) -> tuple[int, int]:
    info = path.lstat()
    return stat.S_IMODE(info.st_mode), info.st_uid


def test_files_have_the_documented_modes_and_owners(make_lab: LabFactory) -> None:
    lab = make_lab(2, "line")
    lab.wait_reachable(WAIT)
    node = lab.nodes[0]
    private = node.run_dir / "private"
    assert mode_and_owner(node.run_dir) == (0o755, 0)
    assert mode_and_owner(node.socket) == (0o666, 0)
    assert stat.S_ISSOCK(node.socket.lstat().st_mode)
    assert mode_and_owner(private) == (0o700, 0)
    assert mode_and_owner(private / "babeld.sock") == (0o600, 0)
    assert mode_and_owner(private / "babeld.pid")[0] & 0o077 == 0
    assert mode_and_owner(node.state_dir) == (0o700, 0)
    assert mode_and_owner(node.state_dir / "node-id")[0] & 0o022 == 0


def test_symlinks_planted_at_the_socket_and_pid_paths_are_not_followed(
    make_lab: LabFactory, tmp_path: Path
) -> None:
    lab: Lab = make_lab(2, "line", False)
    node = lab.nodes[0]
    private = node.run_dir / "private"
    private.mkdir(parents=True, mode=0o700)
    victim_file = tmp_path / "precious"
    victim_file.write_text("keep me\n")
    # A pid file pointing at a live process that is not babeld (this test's own pid):
    # following it would read that pid; it must not even be read.
    victim_pid = tmp_path / "pid"
    victim_pid.write_text(f"{os.getpid()}\n")
    node.socket.symlink_to(victim_file)
    (private / "babeld.pid").symlink_to(victim_pid)
    (private / "babeld.sock").symlink_to(victim_file)
    lab.start_all()
    lab.wait_reachable(WAIT)
    assert victim_file.read_text() == "keep me\n"
    assert victim_pid.read_text() == f"{os.getpid()}\n"
    assert stat.S_ISSOCK(node.socket.lstat().st_mode)
    assert stat.S_ISREG((private / "babeld.pid").lstat().st_mode)
    assert stat.S_ISSOCK((private / "babeld.sock").lstat().st_mode)


NOBODY_CLIENT = """
import json, socket, sys
from babbler.client import Connection
path, private = sys.argv[1], sys.argv[2]
out = {}
with Connection(path) as conn:
    out["status_mesh"] = json.loads(conn.request("status")[0])["mesh"]
    for attempt in ("flush interface v1x2", "quit-babeld", "interface v1x2 hello-interval 9"):
        conn.send(attempt)
        out[attempt] = conn.readline()
    out["dump_lines"] = len(conn.request("dump"))
try:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(private + "/babeld.sock")
    out["private"] = "connected"
except OSError as error:
    out["private"] = type(error).__name__
print(json.dumps(out))
"""


def test_an_unprivileged_user_reads_state_and_cannot_make_babeld_do_anything(
    make_lab: LabFactory,
) -> None:
    lab = make_lab(2, "line")
    lab.wait_reachable(WAIT)
    node = lab.nodes[0]
    before = lab.status(node)
    ctl = Path(sys.executable).with_name("babblerctl")
    shown = subprocess.run(
        [*as_nobody(), str(ctl), "status", "--socket", str(node.socket)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    assert "v1x2" in shown.stdout
    probe = subprocess.run(
        [
            *as_nobody(),
            sys.executable,
            "-c",
            NOBODY_CLIENT,
            str(node.socket),
            str(node.run_dir / "private"),
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        cwd="/",
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert probe.returncode == 0, probe.stderr
    seen = json.loads(probe.stdout)
    assert seen["status_mesh"] == "running" and seen["dump_lines"] > 0
    assert seen["flush interface v1x2"] == "bad unknown request 'flush', try help"
    assert seen["quit-babeld"].startswith("bad unknown request")
    assert seen["interface v1x2 hello-interval 9"].startswith("bad unknown request")
    assert seen["private"] == "PermissionError"
    after = lab.status(node)
    assert after["babeld"] == before["babeld"]  # same pid, no restart

    def used(status: dict[str, Any]) -> list[dict[str, Any]]:  # counters move by themselves
        return [{**i, "counters": None} for i in status["interfaces"] if i["babel"]]

    assert used(after) == used(before)  # babeld still told of the same links, the same way
    state = subprocess.run(
        [*as_nobody(), "cat", str(node.state_dir / "node-id")],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert state.returncode != 0 and "Permission denied" in state.stderr
