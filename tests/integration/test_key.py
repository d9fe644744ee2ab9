"""The mesh key: only nodes with the same key are neighbours; the key never shows on a
command line or in a log; a bad key file is refused with one line, touching nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from babbler.ctl.keygen import write_new_key
from babbler.lab import Lab
from tests.integration.helpers import WAIT, LabFactory, until

pytestmark = pytest.mark.integration


def keyed(lab: Lab, tmp_path: Path, name: str) -> list[str]:
    path = tmp_path / name
    if not path.exists():
        write_new_key(path)
    return ["--key-file", str(path)]


def neighbours(lab: Lab, index: int) -> int:
    return len(lab.status(lab.nodes[index - 1])["neighbours"])


def test_only_nodes_with_the_same_key_are_neighbours(make_lab: LabFactory, tmp_path: Path) -> None:
    lab = make_lab(3, "line", False)
    n1, n2, n3 = lab.nodes
    right = keyed(lab, tmp_path, "right.key")
    lab.start(n1, right)
    lab.start(n2, right)
    lab.start(n3, keyed(lab, tmp_path, "wrong.key"))
    until(lambda: neighbours(lab, 1) == 1 and neighbours(lab, 2) == 1, what="n1 and n2 peer")
    n1_address = lab.status(n1)["node_address"]
    n3_address = lab.status(n3)["node_address"]
    until(lambda: lab.ping(n2, n1_address), what="keyed n1 and n2 reach each other")
    assert lab.status(n1)["keyed"] is True
    # Several hello intervals: n3 never becomes anyone's neighbour.
    deadline = 2.0
    until(lambda: neighbours(lab, 2) == 1, timeout=deadline)
    assert neighbours(lab, 3) == 0
    assert not lab.ping(n1, n3_address, wait=0.5) and not lab.ping(n3, n1_address, wait=0.5)
    assert not any(r["prefix"].startswith(n3_address) for r in lab.status(n1)["routes"])

    # Nothing shows the key: no command line, no log.
    secrets = {(tmp_path / k).read_text().strip() for k in ("right.key", "wrong.key")}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            assert not any(s in cmdline for s in secrets), pid
    for node in lab.nodes:
        assert not any(s in node.log.read_text() for s in secrets), node.name

    # Different keys are said, once, on both sides of the cable (nothing else would say it).
    for node, link in ((n2, "v2x3"), (n3, "v3x2")):
        said = f"no neighbour on {link} for 30 s"
        until(lambda: said in node.log.read_text(), what=f"{node.name}: {said}")  # noqa: B023
        assert "its mesh key differs" in node.log.read_text()
    assert "no neighbour on v2x1" not in n2.log.read_text()

    # The right key and a restart: n3 joins.
    assert n3.pid is not None
    os.kill(n3.pid, 15)
    lab.wait_exit(n3)
    lab.start(n3, right)
    until(lambda: lab.ping(n1, n3_address), timeout=WAIT, what="n3 joined with the right key")
    until(lambda: "neighbour on v2x3 at last" in n2.log.read_text(), what="n2 says so")


def test_bad_key_files_exit_2_with_one_line_and_touch_nothing(
    make_lab: LabFactory, tmp_path: Path
) -> None:
    lab = make_lab(1, "line", False)  # the daemon runs in a namespace of its own, always

    def run_daemon(*args: str) -> subprocess.CompletedProcess[str]:
        return lab.exec(lab.nodes[0], sys.executable, "-m", "babbler.daemon.cli", *args)

    good = tmp_path / "good.key"
    write_new_key(good)
    cases: dict[str, tuple[str, str]] = {}

    def case(name: str, content: str, mode: int = 0o600, owner: int | None = None) -> None:
        path = tmp_path / name
        path.write_text(content)
        path.chmod(mode)
        if owner is not None:
            os.chown(path, owner, owner)
        cases[name] = (str(path), "")

    case("world.key", good.read_text(), 0o644)
    case("group.key", good.read_text(), 0o640)
    case("foreign.key", good.read_text(), 0o600, owner=65534)
    case("nothex.key", "this is not a key\n")
    case("short.key", "00112233445566778899aabbccddee\n")
    expected = {
        "world.key": "readable by group or others (mode 0644)",
        "group.key": "readable by group or others (mode 0640)",
        "foreign.key": "owned by uid 65534",
        "nothex.key": "not hex digits",
        "short.key": "15 bytes; a key has 16 to 64 bytes",
        "absent.key": "no such file",
    }
    cases["absent.key"] = (str(tmp_path / "absent.key"), "")
    run_dir = tmp_path / "run"
    for name, (path, _) in cases.items():
        result = run_daemon("--key-file", path, "--run-dir", str(run_dir), "--interface", "x*")
        assert result.returncode == 2, (name, result.stderr)
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"babblerd: key-file {path}: "), lines
        assert expected[name] in lines[0], lines
        assert good.read_text().strip() not in result.stderr
    assert not run_dir.exists()
