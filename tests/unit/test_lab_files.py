"""The lab's files cannot be redirected: a symlink planted for a log or for lab.json is not
followed, a lab directory someone else owns or may write is refused, and `down` acts on no
namespace and no process the lab did not make, whatever lab.json says. The lab's root is a
directory under pytest's; namespaces are replaced by recorders (nothing here needs one)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import babbler.lab
from babbler.lab import Lab, LabError, netns
from babbler.lab.cli import main as lab_cli
from babbler.lab.processes import Daemons
from babbler.lab.record import check_record

NOBODY = 65534
SECRET = "root's own, 0600\n"
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")


@dataclass
class Namespaces:
    """What the lab asked of the kernel's namespaces."""

    made: list[str] = field(default_factory=list)
    deleted: list[list[str]] = field(default_factory=list)


@pytest.fixture
def namespaces(monkeypatch: pytest.MonkeyPatch) -> Namespaces:
    """The namespace calls replaced by a recorder."""
    seen = Namespaces()
    monkeypatch.setattr(netns, "add_namespace", lambda name, real=False: seen.made.append(name))
    monkeypatch.setattr(netns, "delete_namespaces", seen.deleted.append)
    monkeypatch.setattr(netns, "add_link", lambda *args, **kwargs: None)
    monkeypatch.setattr(netns, "plug", lambda *args, **kwargs: None)
    return seen


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, namespaces: Namespaces) -> Path:
    """The lab root, under pytest's directory (/tmp above it is sticky, so allowed)."""
    path = tmp_path / "babbler-lab"
    monkeypatch.setattr(babbler.lab, "LAB_ROOT", path)
    return path


def secret(tmp_path: Path) -> Path:
    """A root-owned 0600 file the lab must never write."""
    target = tmp_path / "secret"
    target.write_text(SECRET)
    target.chmod(0o600)
    return target


def planted_lab_dir(root: Path, name: str = "evil") -> Path:
    """The lab's directory, made before the lab (as anyone could in /tmp)."""
    base = root / name
    (base / "n1").mkdir(parents=True)
    return base


# -- symlinks and hard links planted for the lab's files ----------------------------------------


def test_a_log_planted_as_a_symlink_is_refused_and_its_target_untouched(
    root: Path, tmp_path: Path
) -> None:
    target = secret(tmp_path)
    log = planted_lab_dir(root) / "n1" / "babblerd.log"
    log.symlink_to(target)
    talker = [sys.executable, "-c", "print('appended by the lab')"]
    with pytest.raises(LabError, match=f"refusing {log}: it is a symlink; remove it"):
        Daemons().spawn(talker, log)
    assert target.read_text() == SECRET


def test_a_log_planted_as_a_hard_link_is_refused(root: Path, tmp_path: Path) -> None:
    target = secret(tmp_path)
    log = planted_lab_dir(root) / "n1" / "babblerd.log"
    os.link(target, log)
    with pytest.raises(LabError, match="2 names \\(a hard link\\)"):
        Daemons().spawn([sys.executable, "-c", "print('appended by the lab')"], log)
    assert target.read_text() == SECRET


def test_lab_json_planted_as_a_symlink_is_replaced_not_followed(root: Path, tmp_path: Path) -> None:
    chosen = tmp_path / "a file of their choosing"
    record = planted_lab_dir(root) / "lab.json"
    record.symlink_to(chosen)
    with pytest.raises(LabError, match=f"refusing {record}: it is a symlink"):
        Lab.load("evil")
    Lab("evil", "line").save()
    assert not chosen.exists()
    assert not record.is_symlink() and json.loads(record.read_text())["name"] == "evil"
    assert oct(record.stat().st_mode & 0o777) == oct(0o644)
    assert sorted(p.name for p in record.parent.iterdir()) == ["lab.json", "n1"]  # no temp


def test_a_log_is_appended_to_across_starts(root: Path) -> None:
    log = planted_lab_dir(root, "fine") / "n1" / "babblerd.log"
    daemons = Daemons()
    for said in ("first", "second"):
        pid = daemons.spawn([sys.executable, "-c", f"print({said!r})"], log)
        assert daemons.wait_exit(pid, "n1") == 0
    assert log.read_text() == "first\nsecond\n"
    assert oct(log.stat().st_mode & 0o777) == oct(0o644)


# -- lab directories that are not root's alone -----------------------------------------------------


@as_root
def test_a_lab_directory_owned_by_someone_else_is_refused_before_anything_is_made(
    root: Path, tmp_path: Path, namespaces: Namespaces
) -> None:
    target = secret(tmp_path)
    base = planted_lab_dir(root)
    (base / "n1" / "babblerd.log").symlink_to(target)  # the attack, as nobody
    (base / "lab.json").symlink_to(tmp_path / "chosen")
    for path in (base, base / "n1"):
        os.chown(path, NOBODY, NOBODY)
    why = f"refusing {base}: it is owned by uid {NOBODY}, not root, so someone else"
    with pytest.raises(LabError, match=why):
        Lab.create("evil", 1, "line", [])
    with pytest.raises(LabError, match=why):
        Lab.load("evil")
    assert namespaces.made == []
    assert target.read_text() == SECRET and not (tmp_path / "chosen").exists()


@pytest.mark.parametrize("writable", ["lab", "root"])
def test_a_lab_directory_others_may_write_is_refused(
    root: Path, monkeypatch: pytest.MonkeyPatch, writable: str, namespaces: Namespaces
) -> None:
    base = planted_lab_dir(root)
    loose = base if writable == "lab" else root
    loose.chmod(0o777)
    message = f"refusing {loose}: it is writable by others \\(mode 777\\)"
    with pytest.raises(LabError, match=message):
        Lab.create("evil", 1, "line", [])
    assert namespaces.made == []


def test_a_symlinked_lab_root_is_refused(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    root.symlink_to(elsewhere)
    with pytest.raises(LabError, match=f"refusing {root}: it is a symlink"):
        Lab.create("evil", 1, "line", [])
    assert list(elsewhere.iterdir()) == []


def test_the_cli_says_the_refusal_in_one_line(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    planted_lab_dir(root).chmod(0o777)
    result = CliRunner().invoke(lab_cli, ["--name", "evil", "up", "--nodes", "1"])
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"babbler-lab: refusing {root / 'evil'}: ")
    assert result.stderr.rstrip().endswith("remove it or fix its owner and mode")


# -- lab.json that names what the lab did not make ------------------------------------------------


def record(root: Path, **changes: object) -> dict[str, Any]:
    """What the lab writes for a 1-node lab `evil`, with `changes` to its node."""
    node = {
        "index": 1,
        "netns": "bbl-evil-n1",
        "base": f"{root}/evil/n1",
        "pid": None,
        "platform": "macos",
        "ports": ["v1x2"],
        "helper_pid": None,
    }
    return {
        "name": "evil",
        "topology": "line",
        "nodes": [{**node, **changes}],
        "links": [],
        "daemon_args": [],
        "real_links": False,
        "speed_gbps": 80,
        "cables": [],
    }


def plant_record(root: Path, data: dict[str, object]) -> Path:
    base = planted_lab_dir(root)
    (base / "lab.json").write_text(json.dumps(data))
    return base


def test_down_refuses_a_record_naming_a_foreign_namespace_without_acting(
    root: Path, monkeypatch: pytest.MonkeyPatch, namespaces: Namespaces
) -> None:
    base = plant_record(root, record(root, netns="bbl-other-n1"))
    result = CliRunner().invoke(lab_cli, ["--name", "evil", "down"])
    assert result.exit_code == 1
    assert result.stderr == (
        f"babbler-lab: refusing {base}/lab.json: node 1's namespace is 'bbl-other-n1', not "
        f"bbl-evil-n1; babbler-lab did not write it (remove {base} if no lab of that name "
        "runs)\n"
    )
    assert namespaces.deleted == []
    assert (base / "lab.json").exists()


@pytest.fixture
def stranger() -> Iterator[subprocess.Popen[bytes]]:
    """A process outside every lab namespace whose command line names the lab's daemons."""
    sleeper = "import time; time.sleep(60)"
    process = subprocess.Popen([sys.executable, "-c", sleeper, "babbler.daemon.cli", "babeld"])
    yield process
    process.kill()
    process.wait()


def test_down_signals_no_process_outside_the_lab_s_namespaces(
    root: Path, stranger: subprocess.Popen[bytes], namespaces: Namespaces
) -> None:
    base = plant_record(root, record(root, pid=stranger.pid))
    private = base / "n1" / "run" / "private"
    private.mkdir(parents=True)
    (private / "babeld.pid").write_text(f"{stranger.pid}\n")
    Lab.load("evil").down()
    assert stranger.poll() is None, "down ended a process the lab did not start"
    assert namespaces.deleted == [["bbl-evil-n1"]]
    assert not base.exists()


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"pid": True}, "node 1's pid is True"),
        ({"pid": 1}, "node 1's pid is 1"),
        ({"pid": "42"}, "node 1's pid is '42'"),
        ({"base": "/etc"}, "node 1's directory is '/etc'"),
        ({"index": 2}, "node 1 has index 2"),
        ({"extra": 1}, "node 1 is not an object of the fields"),
        ({"helper_pid": 0}, "node 1's helper_pid is 0"),
        ({"platform": "windows"}, "node 1's platform is 'windows'"),
        ({"ports": ["../../etc"]}, "node 1's ports are not lab link names"),
    ],
)
def test_a_record_is_checked_field_by_field(change: dict[str, object], why: str) -> None:
    with pytest.raises(LabError, match=why):
        check_record(record(Path("/r"), **change), "evil", "/r/evil")


def test_a_record_s_links_and_name_are_its_own() -> None:
    good = record(Path("/r"))
    assert check_record(good, "evil", "/r/evil") == good
    for bad, why in (
        ({**good, "links": [[1, 2]]}, "links are not pairs of two of its nodes"),
        ({**good, "name": "other"}, "it names lab 'other'"),
        ({**good, "daemon_args": [1]}, "daemon_args is not a list of strings"),
        ([], "not an object of the fields"),
        ({**good, "speed_gbps": 120}, "speed_gbps is not one of 40, 80"),
        ({**good, "speed_gbps": "80"}, "speed_gbps is not one of 40, 80"),
        ({**good, "cables": [[1, 1, "vb"]]}, "cables are not"),
        ({**good, "cables": [[1, 2, "vb"]]}, "cables are not"),  # a 1-node lab has no n2
        ({**good, "cables": [[1, 2]]}, "cables are not"),
        ({**good, "extra": 1}, "not an object of the fields"),  # not written by this lab
        ({k: v for k, v in good.items() if k != "links"}, "not an object of the fields"),
    ):
        with pytest.raises(LabError, match=why):
            check_record(bad, "evil", "/r/evil")


def older_record(root: Path) -> dict[str, Any]:
    """What babbler-lab wrote for a 2-node lab `evil` before macOS nodes (no platform,
    ports, command server), Thunderbolt speeds and cables added later."""
    nodes = [
        {"index": i, "netns": f"bbl-evil-n{i}", "base": f"{root}/evil/n{i}", "pid": None}
        for i in (1, 2)
    ]
    return {
        "name": "evil",
        "topology": "line",
        "nodes": nodes,
        "links": [[1, 2]],
        "daemon_args": ["--mode", "always"],
        "real_links": False,
    }


def test_an_older_record_is_read_as_the_lab_it_was_and_taken_down(
    root: Path, namespaces: Namespaces
) -> None:
    base = plant_record(root, older_record(root))
    lab = Lab.load("evil")
    assert [(n.platform, n.ports, n.helper_pid) for n in lab.nodes] == [("linux", [], None)] * 2
    assert (lab.links, lab.cables, lab.speed_gbps) == ([(1, 2)], [], 40)
    result = CliRunner().invoke(lab_cli, ["--name", "evil", "down"])
    assert (result.exit_code, result.stdout) == (0, "lab evil: down\n"), result.stderr
    assert namespaces.deleted == [["bbl-evil-n1", "bbl-evil-n2"]]
    assert not base.exists()


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"pid": "42"}, "node 1's pid is '42'"),
        ({"netns": "bbl-other-n1"}, "node 1's namespace is 'bbl-other-n1'"),
        ({"extra": 1}, "node 1 is not an object of the fields"),
        ({"platform": "windows"}, "node 1's platform is 'windows'"),
    ],
)
def test_an_older_record_is_checked_as_strictly(change: dict[str, object], why: str) -> None:
    older = older_record(Path("/r"))
    older["nodes"][0].update(change)
    with pytest.raises(LabError, match=why):
        check_record(older, "evil", "/r/evil")


def test_cables_of_every_set_are_recorded_and_read_back() -> None:
    current = {**older_record(Path("/r")), "speed_gbps": 80}
    current["cables"] = [[1, 2, "vb"], [2, 1, "thunderbolt"]]  # names as long as Linux takes
    assert check_record(current, "evil", "/r/evil")["cables"] == current["cables"]


def test_an_older_record_lacking_a_field_every_record_had_is_refused() -> None:
    older = older_record(Path("/r"))
    del older["nodes"][1]["pid"]
    with pytest.raises(LabError, match="node 2 is not an object of the fields"):
        check_record(older, "evil", "/r/evil")
    del older["real_links"]
    with pytest.raises(LabError, match="not an object of the fields"):
        check_record(older, "evil", "/r/evil")


def test_a_lab_that_is_not_up_is_told_apart_from_a_refused_one(root: Path) -> None:
    result = CliRunner().invoke(lab_cli, ["--name", "absent", "down"])
    assert (result.exit_code, result.stdout) == (0, "lab absent: not up (nothing to take down)\n")


def test_a_node_s_files_stay_under_its_lab(root: Path, namespaces: Namespaces) -> None:
    lab = Lab.create("fine", 2, "line", [])
    assert namespaces.made == ["bbl-fine-n1", "bbl-fine-n2"]
    assert [Path(n.base) for n in lab.nodes] == [root / "fine" / "n1", root / "fine" / "n2"]
    assert all(oct(Path(n.base).stat().st_mode & 0o777) == oct(0o755) for n in lab.nodes)
    assert Lab.load("fine").nodes == lab.nodes
    lab.down()
    assert not (root / "fine").exists()


def test_a_namespace_whose_setup_fails_halfway_is_deleted_too(
    root: Path, namespaces: Namespaces, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ip netns add` went through, the sysctl after it failed (no sysctl on PATH): the
    lab's clean-up deletes that namespace as well, not only the finished ones."""

    def add(name: str, real: bool = False) -> None:
        namespaces.made.append(name)
        if name.endswith("n2"):
            raise LabError("sysctl: not found")

    monkeypatch.setattr(netns, "add_namespace", add)
    with pytest.raises(LabError, match="sysctl"):
        Lab.create("half", 3, "line", [])
    assert namespaces.deleted == [["bbl-half-n1", "bbl-half-n2"]]
    assert not (root / "half").exists()
