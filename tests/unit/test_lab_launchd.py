"""The macOS lab's launchctl (babbler/lab/macos/launchctl.py, launchd.py): a plist read
strictly, its program started, kept alive, stopped and printed as launchd would, and the
errors and exit statuses launchctl gives."""

from __future__ import annotations

import os
import plistlib
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from babbler.lab.macos import launchctl, shims
from babbler.lab.macos.commands import USAGE, Failed
from babbler.lab.macos.launchd import Launchd
from babbler.lab.macos.server import open_server
from tests.unit.test_macos_lab import LO0, MemoryHost, shim

LABEL = "org.babbler.test"
WAIT = 20.0


def until(check: Any, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def plist(tmp_path: Path, **keys: Any) -> Path:
    """A LaunchDaemon plist whose program writes its pid and environment, then waits for
    SIGTERM (it says it got it, in its log)."""
    script = (
        "import os, signal, sys, time\n"
        "print('pid', os.getpid(), 'key', os.environ.get('KEY'), 'path',"
        " os.environ['PATH'], flush=True)\n"
        "signal.signal(signal.SIGTERM, lambda *_: (print('sigterm', flush=True), sys.exit(0)))\n"
        "while True: time.sleep(1)\n"
    )
    data: dict[str, Any] = {
        "Label": LABEL,
        "ProgramArguments": [sys.executable, "-c", script],
        "EnvironmentVariables": {"KEY": "value", "PATH": "/usr/bin:/bin"},
        "RunAtLoad": True,
        "KeepAlive": True,
        "ThrottleInterval": 1,
        "ExitTimeOut": 5,
        "StandardOutPath": str(tmp_path / "job.log"),
        "StandardErrorPath": str(tmp_path / "job.log"),
    }
    data.update(keys)
    path = tmp_path / f"{LABEL}.plist"
    path.write_bytes(plistlib.dumps({k: v for k, v in data.items() if v is not None}))
    path.chmod(0o644)
    return path


@pytest.fixture
def launchd(tmp_path: Path) -> Iterator[Launchd]:
    commands = tmp_path / "bin"
    commands.mkdir()
    domain = Launchd(commands)
    try:
        yield domain
    finally:
        domain.stop_all()


def pids(log: Path) -> list[int]:
    if not log.exists():
        return []
    return [int(line.split()[1]) for line in log.read_text().splitlines() if line.startswith("pid")]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")


# -- the plist, strictly --------------------------------------------------------------------


def test_the_shipped_plist_is_read_whole() -> None:
    shipped = Path("babbler/service/files/org.babbler.babblerd.plist")
    job = launchctl.job(str(shipped), shipped.read_bytes())
    assert job.label == "org.babbler.babblerd"
    assert job.keep_alive and job.run_at_load and job.exit_timeout == 10
    assert job.stdout == job.stderr == "/var/log/babblerd.log"


@pytest.mark.parametrize(
    ("keys", "why"),
    [
        ({"UserName": "nobody"}, "key UserName unknown to babbler-lab's launchd"),
        ({"KeepAlive": {"SuccessfulExit": False}}, "KeepAlive must be a bool"),
        ({"ExitTimeOut": True}, "ExitTimeOut must be a int"),
        ({"Label": None}, "no Label"),
        ({"ProgramArguments": ["babblerd"]}, "ProgramArguments[0] is not an absolute path"),
    ],
)
def test_a_key_the_lab_does_not_know_fails_the_bootstrap(
    tmp_path: Path, launchd: Launchd, keys: dict[str, Any], why: str
) -> None:
    path = plist(tmp_path, **keys)
    done = launchd.answer(["bootstrap", "system", str(path)])
    assert done.code == 5
    assert why in done.err
    assert done.err.endswith("Bootstrap failed: 5: Input/output error\n")
    assert launchd.answer(["print", f"system/{LABEL}"]).code == 113


def test_a_plist_that_does_not_parse_or_others_may_write_is_refused(
    tmp_path: Path, launchd: Launchd
) -> None:
    path = plist(tmp_path)
    path.chmod(0o666)
    assert "bad ownership/permissions" in launchd.answer(["bootstrap", "system", str(path)]).err
    path.write_text("<plist><dict><key>Label</key></dict>")
    path.chmod(0o644)
    assert "not a property list" in launchd.answer(["bootstrap", "system", str(path)]).err
    missing = launchd.answer(["bootstrap", "system", str(tmp_path / "none.plist")])
    assert (missing.code, missing.err.splitlines()[0]) == (
        2,
        "Bootstrap failed: 2: No such file or directory",
    )


@pytest.mark.parametrize(
    "args",
    [["load", "/x.plist"], ["bootstrap", "gui/501", "/x.plist"], ["print", "system"], ["list"]],
)
def test_a_line_the_lab_does_not_answer_is_refused(launchd: Launchd, args: list[str]) -> None:
    done = launchd.answer(args)
    assert done.code == USAGE
    assert "does not answer" in done.err


# -- the job's process ----------------------------------------------------------------------


def test_bootstrap_starts_the_program_with_its_environment_and_bootout_stops_it(
    tmp_path: Path, launchd: Launchd
) -> None:
    path = plist(tmp_path)
    assert launchd.answer(["bootstrap", "system", str(path)]).code == 0
    log = tmp_path / "job.log"
    until(lambda: pids(log))
    line = log.read_text().splitlines()[0]
    assert "key value" in line
    assert line.endswith(f"path {tmp_path / 'bin'}:/usr/bin:/bin")  # the node's commands first
    printed = launchd.answer(["print", f"system/{LABEL}"])
    assert printed.code == 0
    assert printed.out.startswith(f"system/{LABEL} = {{\n")
    assert "\tstate = running\n" in printed.out
    assert f"\tpid = {pids(log)[0]}\n" in printed.out
    assert f"\tpath = {path}\n" in printed.out

    again = launchd.answer(["bootstrap", "system", str(path)])
    assert (again.code, again.err) == (5, "Bootstrap failed: 5: Input/output error\n")

    assert launchd.answer(["bootout", f"system/{LABEL}"]).code == 0
    assert log.read_text().splitlines()[-1] == "sigterm"  # SIGTERM first, as launchd
    assert not alive(pids(log)[0])
    gone = launchd.answer(["print", f"system/{LABEL}"])
    assert (gone.code, gone.err) == (
        113,
        f'Could not find service "{LABEL}" in domain for system\n',
    )
    out = launchd.answer(["bootout", f"system/{LABEL}"])
    assert (out.code, out.err) == (3, "Boot-out failed: 3: No such process\n")


def test_keepalive_starts_the_program_again_after_it_dies(tmp_path: Path, launchd: Launchd) -> None:
    path = plist(tmp_path)
    launchd.bootstrap(str(path))
    log = tmp_path / "job.log"
    until(lambda: pids(log))
    os.kill(pids(log)[0], signal.SIGKILL)
    until(lambda: len(pids(log)) == 2)
    printed = launchd.print(LABEL)
    assert "\truns = 2\n" in printed
    assert "\tlast exit code = -9\n" in printed
    launchd.answer(["bootout", "system", str(path)])  # by its plist, too
    assert not any(alive(pid) for pid in pids(log))


def test_without_keepalive_a_program_that_exits_stays_down(
    tmp_path: Path, launchd: Launchd
) -> None:
    path = plist(tmp_path, KeepAlive=None, ProgramArguments=["/bin/sh", "-c", "exit 3"])
    launchd.bootstrap(str(path))
    until(lambda: "last exit code = 3" in launchd.print(LABEL))
    assert "\tstate = not running\n" in launchd.print(LABEL)


def test_a_program_that_ignores_sigterm_is_killed_after_exit_timeout(
    tmp_path: Path, launchd: Launchd
) -> None:
    stubborn = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    stubborn += "print('pid', __import__('os').getpid(), flush=True)\nwhile True: time.sleep(1)\n"
    path = plist(tmp_path, ProgramArguments=[sys.executable, "-c", stubborn], ExitTimeOut=1)
    launchd.bootstrap(str(path))
    log = tmp_path / "job.log"
    until(lambda: pids(log))
    started = time.monotonic()
    launchd.bootout(LABEL)
    assert 0.9 < time.monotonic() - started < WAIT
    assert not alive(pids(log)[0])


# -- through the node's server and its shim -------------------------------------------------


def test_launchctl_on_the_path_asks_the_nodes_launchd(tmp_path: Path) -> None:
    """A bootout waits for the job while the server answers the job's own commands (as
    babblerd runs ifconfig while it stops): launchctl is answered outside their lock."""
    commands = tmp_path / "bin"
    domain = Launchd(commands)
    server = open_server(MemoryHost([LO0]), 0, domain)
    thread = threading.Thread(target=server.serve_forever)
    thread.start()
    stopping = (
        "import os, signal, subprocess, sys, time\n"
        "def stop(*_):\n"
        "    done = subprocess.run(['ifconfig', '-l'], capture_output=True, text=True)\n"
        "    print('stopping', done.returncode, done.stdout.strip(), flush=True)\n"
        "    sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, stop)\n"
        "print('pid', os.getpid(), flush=True)\n"
        "while True: time.sleep(1)\n"
    )
    try:
        shims.install(commands, server.server_address[1])
        path = plist(tmp_path, ProgramArguments=[sys.executable, "-c", stopping])
        assert shim(commands, "launchctl", "bootstrap", "system", str(path))[0] == 0
        log = tmp_path / "job.log"
        until(lambda: pids(log))
        code, out, _ = shim(commands, "launchctl", "print", f"system/{LABEL}")
        assert code == 0
        assert out.startswith(f"system/{LABEL} = {{\n".encode())
        assert b"\tstate = running\n" in out
        started = time.monotonic()
        assert shim(commands, "launchctl", "bootout", f"system/{LABEL}")[0] == 0
        assert time.monotonic() - started < 4  # not its ExitTimeOut (5 s), then SIGKILL
        assert log.read_text().splitlines()[-1] == "stopping 0 lo0"
    finally:
        domain.stop_all()
        server.shutdown()
        server.server_close()
        thread.join()


def test_failed_is_what_launchctl_raises() -> None:
    with pytest.raises(Failed):
        launchctl.read_args(["kickstart", "-k", f"system/{LABEL}"])
