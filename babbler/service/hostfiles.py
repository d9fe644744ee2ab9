"""The host's files and commands as install-system-daemon touches them, on Linux and macOS
alike (systemd.py and launchd.py): a command run, a root's file written only when it
differs, removed; the config file's steps (plan.py says what, this module does it).
Each failure is one line (EnvironmentProblem), never a traceback.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from babbler.client import Client
from babbler.client.errors import ClientError
from babbler.core.config import Config, merge
from babbler.core.errors import EnvironmentProblem
from babbler.host.whole import replace_whole
from babbler.service import plan

Say = Callable[[str], None]

COMMAND_SECONDS = 90.0  # one command (systemctl start waits for READY=1)
WAIT_SECONDS = 60.0  # for the public socket to answer `status` after a start
POLL_SECONDS = 0.2


def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a command; raises EnvironmentProblem (one line) when it cannot run, does not
    finish in COMMAND_SECONDS or, with `check`, fails."""
    try:
        done = subprocess.run(
            list(args), capture_output=True, text=True, timeout=COMMAND_SECONDS, check=False
        )
    except subprocess.TimeoutExpired:
        raise EnvironmentProblem(
            f"{' '.join(args)} did not finish within {COMMAND_SECONDS:g} s: "
            "the system's log says why"
        ) from None
    except OSError as error:
        raise EnvironmentProblem(f"{args[0]} could not run: {error.strerror}") from None
    if check and done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()
        raise EnvironmentProblem(
            f"{' '.join(args)} failed: {detail[-1] if detail else f'exit {done.returncode}'}"
        )
    return done


def read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):
        return None
    except UnicodeDecodeError:
        return ""  # not ours, whatever it is: differs from anything install writes
    except OSError as error:
        raise EnvironmentProblem(f"could not read {path}: {error.strerror}") from None


def write(path: Path, text: str, mode: int = 0o644) -> bool:
    """Write `text` (root's, `mode`) unless the file holds it already; whether it changed.
    Raises EnvironmentProblem (one line) when it cannot."""
    if read(path) == text:
        return False
    try:
        path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        replace_whole(path, text.encode(), mode)
    except OSError as error:
        raise EnvironmentProblem(f"could not write {path}: {error.strerror}") from None
    return True


def remove(path: Path) -> bool:
    """Remove a file; whether it was there. Raises EnvironmentProblem (one line)."""
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    except OSError as error:
        raise EnvironmentProblem(f"could not remove {path}: {error.strerror}") from None
    return True


def remove_tree(directory: Path) -> bool:
    """Remove a directory and all in it (never through a link); whether it was there.
    Raises EnvironmentProblem (one line)."""
    if not directory.is_dir() or directory.is_symlink():
        return False
    try:
        shutil.rmtree(directory)
    except OSError as error:
        raise EnvironmentProblem(f"could not remove {directory}: {error.strerror}") from None
    return True


def make_dir(directory: Path) -> None:
    """A directory (root's, 0755) and its parents. Raises EnvironmentProblem (one line)."""
    try:
        directory.mkdir(mode=0o755, parents=True, exist_ok=True)
    except OSError as error:
        raise EnvironmentProblem(f"could not make {directory}: {error.strerror}") from None


def settings(config_text: str | None) -> Config:
    """The settings the service will run with: the file it will read. Raises ConfigError."""
    return merge(plan.parse_config(config_text) if config_text else {}, {}, plan.CONFIG_FILE)


def planned_config(path: Path, request: plan.Request) -> tuple[plan.ConfigPlan, str | None]:
    """What install does with the config file at `path` , and the text the
    service will read there. Raises EnvironmentProblem: a file edited by hand differs."""
    there = read(path)
    config_plan = plan.plan_config(there, request)
    if config_plan.action == "refuse":
        raise EnvironmentProblem("\n".join(config_plan.lines))
    return config_plan, config_plan.text if config_plan.action == "write" else there


def drop_config(path: Path, say: Say) -> list[str]:
    """Uninstall's step for the config file : removed when install wrote it
    and no one edited it; kept, and said, otherwise. What it removed."""
    text = read(path)
    if text is None:
        return []
    if not plan.written_by_install(text):
        say(f"kept {path}: edited by hand (--purge removes it)")
        return []
    remove(path)
    return [f"removed {path}"]


def remove_if_empty(directory: Path) -> None:
    with contextlib.suppress(OSError):  # missing, or holds someone's files
        directory.rmdir()


def wrote_config(path: Path, config_plan: plan.ConfigPlan) -> list[str]:
    """What install says on writing the config file : the file, and each
    setting that changed from the file there (one dropped says so too)."""
    return [f"wrote {path}", *(f"  {line}" for line in config_plan.lines)]


# -- the running service ---------------------------------------------------------------------


def running_version(socket: Path) -> str | None:
    """The version of the babblerd answering on `socket`, or None when none answers."""
    try:
        return Client(socket, timeout=5.0).status().version
    except ClientError:
        return None


def wait_for_socket(socket: Path, why: str) -> None:
    """Until babblerd answers on `socket`; raises EnvironmentProblem after WAIT_SECONDS,
    naming `why` (where the service's log says why)."""
    deadline = time.monotonic() + WAIT_SECONDS
    while running_version(socket) is None:
        if time.monotonic() > deadline:
            raise EnvironmentProblem(
                f"babblerd did not answer on {socket} within {WAIT_SECONDS:g} s: {why}"
            )
        time.sleep(POLL_SECONDS)


def print_status(program: Path, socket: Path, say: Say) -> None:
    """What `babblerctl status` beside `program` says, line by line (nothing without it)."""
    ctl = program.with_name("babblerctl")
    if not ctl.exists():
        return
    done = run(str(ctl), "--socket", str(socket), "status", check=False)
    for line in (done.stdout or done.stderr).rstrip("\n").splitlines():
        say(line)
