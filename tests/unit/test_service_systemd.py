"""`babblerd install-system-daemon` on Linux refuses, with one line and changing nothing,
where it cannot work: not root, no systemd, babeld missing, a program others can write, a
hand-edited config that differs. (It working is scripts/systemd-check's, under a real
systemd: tests/service/test_systemd.py.)"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from babbler.core.errors import EnvironmentProblem
from babbler.service import command, hostfiles, launchd, plan, systemd
from babbler.service.plan import Request


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The files install writes, under tmp_path; root, systemd and a trusted program."""
    root = tmp_path / "host"
    for name, path in (
        ("UNIT", "etc/systemd/system/babblerd.service"),
        ("DROPINS", "etc/systemd/system/babblerd.service.d"),
        ("SYSUSERS", "usr/lib/sysusers.d/babbler.conf"),
        ("LINKS", "usr/local/bin"),
    ):
        monkeypatch.setattr(systemd, name, root / path)
    monkeypatch.setattr(plan, "CONFIG_FILE", root / "etc/babbler/babblerd.toml")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(systemd, "_root_problem", lambda what: None)
    monkeypatch.setattr(systemd, "program_problem", lambda program: None)
    ran: list[tuple[str, ...]] = []
    monkeypatch.setattr(systemd, "run", lambda *args, check=True: ran.append(args))
    return root


def files(root: Path) -> list[Path]:
    return sorted(path for path in root.rglob("*") if path.is_file())


def refusal(request: Request) -> str:
    with pytest.raises(EnvironmentProblem) as raised:
        systemd.install(request, print)
    return str(raised.value)


def test_babeld_missing_names_the_command_that_installs_it(
    host: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(systemd, "SERVICE_PATH", str(host / "empty"))
    found = {"apt-get": "/usr/bin/apt-get"}  # Debian, but no babeld
    monkeypatch.setattr(shutil, "which", lambda name, path=None: found.get(name))
    said = refusal(Request({}))
    assert said == "babeld not found on the service's PATH: sudo apt-get install babeld"
    assert files(host) == []


def test_a_program_others_can_write_is_refused(host: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(systemd, "program_problem", lambda program: f"{program} (writable)")
    assert refusal(Request({}, program=Path("/opt/x/babblerd"))) == "/opt/x/babblerd (writable)"
    assert files(host) == []


def test_a_hand_edited_config_that_differs_is_kept_and_said(host: Path) -> None:
    config = plan.CONFIG_FILE
    config.parent.mkdir(parents=True)
    config.write_text('exclude = ["eth8"]\n')
    said = refusal(Request({"exclude": ("eth9",)}))
    assert "exclude: the file sets ['eth8'], the flags ['eth9']" in said
    assert "--force" in said.splitlines()[-1]
    assert files(host) == [config] and config.read_text() == 'exclude = ["eth8"]\n'


def test_the_refusals_when_not_root_or_without_systemd(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert systemd._root_problem("install-system-daemon") == (
        "run it as root: sudo babblerd install-system-daemon"
    )
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(Path, "is_dir", lambda self: str(self) != "/run/systemd/system")
    said = systemd._root_problem("uninstall-system-daemon")
    assert said is not None and said.startswith("systemd is not running this machine")


AS_NOBODY = ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--")


def test_not_root_is_one_line_from_the_command() -> None:
    """As a user sees it: one line on stderr, exit 1, nothing else said."""
    done = subprocess.run(
        [*AS_NOBODY, sys.executable, "-m", "babbler.daemon.cli", "install-system-daemon"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr == "babblerd: run it as root: sudo babblerd install-system-daemon\n"
    assert done.stdout == ""


def test_a_relative_key_file_is_handed_to_systemd_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LoadCredential takes an absolute path; the key is named from the shell's directory."""
    seen: list[Request] = []

    def install(request: Request, say: object) -> int:
        seen.append(request)
        return 0

    monkeypatch.setattr(systemd, "install", install)
    monkeypatch.setattr(launchd, "install", install)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit):
        command.run(["install-system-daemon", "--key-file", "keys/mesh.key", "--platform", "linux"])
    assert seen[0].key_file == tmp_path / "keys/mesh.key"


def test_a_babeld_others_can_write_is_refused(
    host: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """babeld runs with the service's rights: --babeld at a file a user can write (here
    in a directory writable by all) or under /home (hidden by ProtectHome) is refused."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    babeld = shared / "babeld"
    babeld.write_text("#!/bin/sh\n")
    babeld.chmod(0o755)
    monkeypatch.setattr(shutil, "which", lambda name, path=None: str(babeld))
    said = refusal(Request({"babeld": str(babeld)}))
    assert said.startswith(f"{shared} (writable by others)")
    assert "would let a user run code as root through " + str(babeld) in said
    assert said.endswith("sudo apt-get install babeld, without --babeld")
    assert files(host) == []
    monkeypatch.setattr(shutil, "which", lambda name, path=None: "/home/ann/bin/babeld")
    assert "which the service cannot see" in refusal(Request({}))
    monkeypatch.setattr(shutil, "which", lambda name, path=None: "/bin/sh")
    assert systemd._babeld_problem("babeld") is None  # root's alone


def _said_by_command(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, step: object
) -> tuple[int, str]:
    """What `babblerd install-system-daemon` says when `step` fails inside it."""

    def install(request: Request, say: object) -> int:
        assert callable(step)
        step()
        return 0

    monkeypatch.setattr(systemd, "install", install)
    with pytest.raises(SystemExit) as exited:
        command.run(["install-system-daemon", "--platform", "linux"])
    return int(str(exited.value.code)), capsys.readouterr().err


def test_a_command_that_cannot_run_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, err = _said_by_command(
        capsys, monkeypatch, lambda: hostfiles.run("babbler-h6-no-such-program", "x")
    )
    assert (code, err) == (
        1,
        "babblerd: babbler-h6-no-such-program could not run: No such file or directory\n",
    )


def test_a_command_that_hangs_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hostfiles, "COMMAND_SECONDS", 0.2)
    code, err = _said_by_command(capsys, monkeypatch, lambda: hostfiles.run("sleep", "5"))
    assert (code, err) == (
        1,
        "babblerd: sleep 5 did not finish within 0.2 s: the system's log says why\n",
    )


def test_a_file_that_cannot_be_written_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "etc").write_text("a file where a directory should be")
    target = tmp_path / "etc/babbler/babblerd.toml"
    code, err = _said_by_command(capsys, monkeypatch, lambda: hostfiles.write(target, "x"))
    assert (code, err) == (1, f"babblerd: could not write {target}: Not a directory\n")


@pytest.fixture
def up(host: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """An install that goes through (its commands answered as on a host where babblerd
    is installed, enabled and active); what it says."""

    def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        answer = {"is-enabled": "enabled\n", "is-active": "active\n"}
        return subprocess.CompletedProcess(args, 0, answer.get(args[1], "") if args[1:] else "")

    monkeypatch.setattr(systemd, "run", run)
    monkeypatch.setattr(systemd, "_babeld_problem", lambda babeld: None)
    monkeypatch.setattr(systemd, "_user_exists", lambda: True)
    monkeypatch.setattr(systemd, "_print_status", lambda program, say: None)
    monkeypatch.setattr(systemd, "_wait_for_socket", lambda: None)
    monkeypatch.setattr(systemd, "_running_version", lambda: None)
    said: list[str] = []
    systemd.install(Request({}), said.append)  # the unit and its drop-in in place
    said.clear()
    return said


def test_a_silent_babblerd_is_restarted_as_such(up: list[str]) -> None:
    """Active but not answering: restarted, and said so, never as 'was None'."""
    systemd.install(Request({}), up.append)
    assert up == ["restarted babblerd (it did not answer)"]


def test_what_was_written_is_said_before_a_wait_that_fails(
    up: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def never() -> None:
        raise EnvironmentProblem("babblerd did not answer")

    monkeypatch.setattr(systemd, "_wait_for_socket", never)
    with pytest.raises(EnvironmentProblem):
        systemd.install(Request({"exclude": ("eth9",)}), up.append)
    assert up[0] == f"wrote {plan.CONFIG_FILE}"
    assert up[-1] == "restarted babblerd (it did not answer)"


def test_rewriting_its_own_config_says_each_setting_it_changes(up: list[str]) -> None:
    systemd.install(Request({"ipv4-prefix": "10.88.0.0/16", "exclude": ("eth9",)}), up.append)
    up.clear()
    systemd.install(Request({"exclude": ("eth8",)}), up.append)
    wrote = up.index(f"wrote {plan.CONFIG_FILE}")
    assert sorted(up[wrote + 1 : wrote + 3]) == [
        "  exclude: the file sets ['eth9'], the flags ['eth8']",
        "  ipv4-prefix: the file sets '10.88.0.0/16', the flags do not",
    ]


def test_installing_from_another_venv_moves_the_links(up: list[str], host: Path) -> None:
    """Install from venv A, then B, then uninstall: no link into A (or B) is left."""
    links = host / "usr/local/bin"
    for venv in ("a", "b"):
        for name in systemd.PROGRAMS:
            (host / venv / "bin").mkdir(parents=True, exist_ok=True)
            (host / venv / "bin" / name).write_text("")
        systemd.install(Request({}, program=host / venv / "bin/babblerd"), up.append)
        assert os.readlink(links / "babblerctl") == str(host / venv / "bin/babblerctl")
    assert f"linked {links / 'babblerd'} -> {host / 'b/bin/babblerd'}" in up
    (links / "other").symlink_to(host / "a/bin/babblerd")  # not install's: stays
    systemd.uninstall(False, up.append)
    assert sorted(path.name for path in links.iterdir()) == ["other"]
