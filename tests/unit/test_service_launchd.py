"""babblerd install-system-daemon's macOS side (babbler/service/launchd.py): the plist it
writes is one the lab's strict launchctl reads, with babblerd's own flags; every path sits
under the lab's root when one is set; refusals change nothing."""

from __future__ import annotations

import plistlib
from pathlib import Path

import pytest

from babbler.core.errors import EnvironmentProblem
from babbler.daemon.cli_command import parse
from babbler.lab.macos import launchctl
from babbler.service import hostfiles, launchd, plan

PROGRAM = Path("/usr/local/lib/babbler/bin/babblerd")
KEY = Path("/etc/babbler/mesh.key")


def test_on_a_mac_the_plist_is_the_shipped_one_with_the_program_platform_and_key() -> None:
    where = launchd.Paths()
    data = launchd.plist_bytes(PROGRAM, KEY, where, config=True)
    job = launchctl.job(str(where.plist), data)  # every key one launchd knows, typed
    assert where.plist == Path("/Library/LaunchDaemons/org.babbler.babblerd.plist")
    assert job.label == launchd.LABEL and job.keep_alive and job.run_at_load
    assert job.arguments == (
        str(PROGRAM),
        *("--log-format", "json", "--platform", "macos", "--key-file", str(KEY)),
    )
    assert job.stdout == job.stderr == "/var/log/babblerd.log"
    shipped = plistlib.loads(launchd.SHIPPED.read_bytes())
    written = plistlib.loads(data)
    assert {k: v for k, v in written.items() if k not in ("ProgramArguments",)} == {
        k: v for k, v in shipped.items() if k not in ("ProgramArguments",)
    }


def test_babblerd_reads_the_plists_command_line() -> None:
    where = launchd.Paths(Path("/run/babbler-lab/x/n1/mac"))
    arguments = plistlib.loads(launchd.plist_bytes(PROGRAM, KEY, where, config=True))
    config, given = parse(arguments["ProgramArguments"][1:])
    assert config == where.config
    assert given["platform"] == "macos" and given["key-file"] == str(KEY)
    assert (given["run-dir"], given["state-dir"]) == (str(where.run_dir), str(where.state_dir))


def test_in_the_lab_every_path_is_under_the_nodes_root(monkeypatch: pytest.MonkeyPatch) -> None:
    root = Path("/run/babbler-lab/x/n1/mac")
    monkeypatch.setenv(launchd.ROOT_VARIABLE, str(root))
    where = launchd.paths()
    for path in (where.plist, where.config, where.run_dir, where.state_dir, where.log):
        assert path.is_relative_to(root)
    arguments = plistlib.loads(launchd.plist_bytes(PROGRAM, None, where, config=False))
    assert arguments["ProgramArguments"][-4:] == [
        *("--run-dir", str(root / "var/run/babbler")),
        *("--state-dir", str(root / "var/db/babbler")),
    ]
    monkeypatch.delenv(launchd.ROOT_VARIABLE)
    assert launchd.paths() == launchd.Paths(Path("/"))


def test_install_refuses_without_launchctl_changing_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(launchd.ROOT_VARIABLE, str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))  # no launchctl on it: not a Mac
    monkeypatch.setattr("os.geteuid", lambda: 0)
    request = plan.Request(flags={"linger": "30"}, program=PROGRAM)
    with pytest.raises(EnvironmentProblem, match="launchctl not found: this is not a Mac"):
        launchd.install(request, print)
    monkeypatch.setattr("os.geteuid", lambda: 501)
    with pytest.raises(EnvironmentProblem, match="run it as root: sudo babblerd"):
        launchd.uninstall(False, print)
    assert list(tmp_path.iterdir()) == []


def test_on_a_mac_homebrews_python_is_refused_with_a_way_out_that_works(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Homebrew's Python is the user's: the way out must not be another venv made with it
    (nor one in /usr/local/lib, the user's on an Intel Mac), but python.org's made root's."""
    from babbler.service import program

    cellar = Path("/opt/homebrew/Cellar/python@3.12/3.12.1/bin/python3.12")
    steps = (plan.PathFacts(Path("/"), 0, 0o40755), plan.PathFacts(cellar, 501, 0o100755))
    monkeypatch.setattr(program, "chain", lambda path: plan.Chain(cellar, steps))
    monkeypatch.setattr(launchd, "_root_problem", lambda what: None)
    monkeypatch.setenv(launchd.ROOT_VARIABLE, str(tmp_path))
    with pytest.raises(EnvironmentProblem) as raised:
        launchd.install(plan.Request({}, program=PROGRAM), print)
    said = str(raised.value)
    assert said.startswith(f"{cellar} (owned by uid 501) would let a user run code as root")
    assert "sudo python3 -m venv" not in said and "/usr/local/lib" not in said
    assert "/Library/Frameworks/Python.framework/Versions/Current/bin/python3 -m venv" in said
    assert list(tmp_path.iterdir()) == []


def test_on_a_mac_homebrews_babeld_is_refused_with_a_copy_for_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The LaunchDaemon runs babeld as root: a Homebrew babeld (the user's) is refused, and
    the way out is root's copy, named with --babeld."""
    import shutil

    from babbler.service import program

    brewed = "/opt/homebrew/sbin/babeld"
    steps = (plan.PathFacts(Path("/"), 0, 0o40755), plan.PathFacts(Path(brewed), 501, 0o100755))
    monkeypatch.setattr(program, "chain", lambda path: plan.Chain(path, steps))
    monkeypatch.setattr(shutil, "which", lambda name, path=None: brewed)
    said = launchd._babeld_problem("babeld")
    assert said is not None and said.startswith(f"{brewed} (owned by uid 501)")
    assert said.endswith(
        f"sudo install -o root -g wheel -m 0755 {brewed} /opt/babbler/bin/babeld, "
        "then install with --babeld /opt/babbler/bin/babeld"
    )


def _installed_mac(root: Path, monkeypatch: pytest.MonkeyPatch) -> launchd.Paths:
    """A lab Mac's root with what install and a babblerd that ran leave there."""
    monkeypatch.setenv(launchd.ROOT_VARIABLE, str(root))
    monkeypatch.setattr(launchd, "_root_problem", lambda what: None)
    monkeypatch.setattr(launchd, "_loaded", lambda: True)
    monkeypatch.setattr(launchd, "_launchctl", lambda *args: None)
    where = launchd.paths()
    config = plan.config_text({"exclude": ("en9",)})
    for path, text in (
        (where.plist, "plist"),
        (where.config, config),
        (where.log, "log"),
        (where.state_dir / "node-id", "0123456789ab"),
        (where.run_dir / "private" / "babeld.conf", "conf"),
    ):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return where


def _left(root: Path) -> list[str]:
    """Files and directories under root but the ones every Mac has."""
    a_macs = {"Library", "Library/LaunchDaemons", "etc", "var", "var/log", "var/run", "var/db"}
    found = {str(path.relative_to(root)) for path in root.rglob("*")}
    return sorted(found - a_macs)


def test_uninstall_leaves_only_the_state_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    where = _installed_mac(tmp_path, monkeypatch)
    said: list[str] = []
    assert launchd.uninstall(False, said.append) == 0
    assert _left(tmp_path) == ["var/db/babbler", "var/db/babbler/node-id"]
    assert f"removed {where.run_dir}" in said and f"removed {where.log}" in said
    assert launchd.uninstall(True, said.append) == 0
    assert _left(tmp_path) == []


def test_a_file_or_directory_install_cannot_touch_is_one_line(tmp_path: Path) -> None:
    """What the host refuses (a read-only or foreign directory) is said in one line, not a
    traceback: install and uninstall turn it into `babblerd: ...` and exit 1."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(EnvironmentProblem, match=f"^could not make {blocker}/log: "):
        hostfiles.make_dir(blocker / "log")
    with pytest.raises(EnvironmentProblem, match=f"^could not remove {tmp_path}: "):
        hostfiles.remove(tmp_path)  # a directory, as a file
    assert not hostfiles.remove_tree(blocker)  # a file is no tree: nothing removed
    assert blocker.exists()
    tree = tmp_path / "tree"
    (tree / "below").mkdir(parents=True)
    link = tmp_path / "link"
    link.symlink_to(tree)
    assert not hostfiles.remove_tree(link) and (tree / "below").is_dir()  # never through a link
    assert hostfiles.remove_tree(tree) and not tree.exists()
