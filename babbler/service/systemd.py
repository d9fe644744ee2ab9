"""babblerd as a systemd service, in one command each way (docs/operations.md "Install on
your machines"): the system user (sysusers), the shipped unit, its drop-ins where it must
follow a flag, the config file, daemon-reload, enable, start, the wait for the socket;
uninstall (and --purge) and status. What to write is plan.py's; this module does it.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from babbler import __version__
from babbler.client import Client
from babbler.client.errors import ClientError
from babbler.core.config import Config, merge
from babbler.core.errors import EnvironmentProblem
from babbler.core.platform import LINUX, SOCKET_NAME
from babbler.daemon.keyfile import load_key
from babbler.service import plan
from babbler.service.program import babeld_problem, program_problem

Say = Callable[[str], None]

UNIT = Path("/etc/systemd/system/babblerd.service")
DROPINS = Path("/etc/systemd/system/babblerd.service.d")
SYSUSERS = Path("/usr/lib/sysusers.d/babbler.conf")
LINKS = Path("/usr/local/bin")  # where the programs are linked when they live elsewhere
PROGRAMS = ("babblerd", "babblerctl")
CONFIG_DIR = plan.CONFIG_FILE.parent
STATE_DIR = LINUX.state_dir
SOCKET = LINUX.run_dir / SOCKET_NAME
USER = "babbler"
SERVICE = "babblerd"
# systemd's PATH for services (systemd.exec(5), "Environment"): where the unit finds babeld.
SERVICE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
WAIT_SECONDS = 60.0  # for the public socket to answer `status` after a start
POLL_SECONDS = 0.2
COMMAND_SECONDS = 90.0  # one systemctl call (a start waits for READY=1)
OURS = ("program.conf", "key.conf", "ipv4-prefix.conf")  # the drop-ins install writes


def _run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
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


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):
        return None
    except UnicodeDecodeError:
        return ""  # not ours, whatever it is: differs from anything install writes
    except OSError as error:
        raise EnvironmentProblem(f"could not read {path}: {error.strerror}") from None


def _write(path: Path, text: str, mode: int = 0o644) -> bool:
    """Write `text` (root's, `mode`) unless the file holds it already; whether it changed.
    Raises EnvironmentProblem (one line) when it cannot."""
    if _read(path) == text:
        return False
    temporary = path.with_name(f".{path.name}.new")
    try:
        path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except OSError as error:
        raise EnvironmentProblem(f"could not write {path}: {error.strerror}") from None
    return True


def _remove(path: Path) -> bool:
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True


# -- refusals -----------------------------------------------------------------------------


def _root_problem(what: str) -> str | None:
    if os.geteuid() != 0:
        return f"run it as root: sudo babblerd {what}"
    if not Path("/run/systemd/system").is_dir():
        return (
            "systemd is not running this machine (no /run/systemd/system): start babblerd "
            "another way (docs/operations.md)"
        )
    return None


def _babeld_problem(babeld: str) -> str | None:
    found = shutil.which(babeld, path=SERVICE_PATH)
    if found is not None:
        return babeld_problem(
            found,
            plan.HIDDEN,
            "use a babeld only root can write: sudo apt-get install babeld, without --babeld",
        )
    if shutil.which("apt-get") is not None:
        return f"{babeld} not found on the service's PATH: sudo apt-get install babeld"
    return f"{babeld} not found on the service's PATH ({SERVICE_PATH}): install babeld"


def _settings(config_text: str | None) -> Config:
    """The settings the service will run with: the file it will read. Raises ConfigError."""
    return merge(plan.parse_config(config_text) if config_text else {}, {}, plan.CONFIG_FILE)


def _planned_config(path: Path, request: plan.Request) -> tuple[plan.ConfigPlan, str | None]:
    """What install does with the config file at `path` (launchd's too), and the text the
    service will read there. Raises EnvironmentProblem: a file edited by hand differs."""
    there = _read(path)
    config_plan = plan.plan_config(there, request)
    if config_plan.action == "refuse":
        raise EnvironmentProblem("\n".join(config_plan.lines))
    return config_plan, config_plan.text if config_plan.action == "write" else there


# -- install ------------------------------------------------------------------------------


def install(request: plan.Request, say: Say) -> int:
    """Install, or bring up to date, babblerd as the systemd service `babblerd`; say what
    changed (or "no change"), wait until it answers, print its status. Raises
    EnvironmentProblem (refused, nothing changed; or a step failed) and ConfigError."""
    problem = _root_problem("install-system-daemon") or program_problem(request.program)
    if problem:
        raise EnvironmentProblem(problem)
    config_plan, config_text = _planned_config(plan.CONFIG_FILE, request)
    config = _settings(config_text)
    problem = _babeld_problem(config.babeld)
    if problem:
        raise EnvironmentProblem(problem)
    key_file = request.key_file
    if key_file is not None:
        load_key(key_file)  # raises ConfigError: missing, not root's 0600, not a key

    previous = installed_program()  # before program.conf names this one
    changed: list[str] = []
    if _write(SYSUSERS, (plan.FILES / "babbler.sysusers").read_text()):
        changed.append(f"wrote {SYSUSERS}")
    if not _user_exists():
        _run("systemd-sysusers", str(SYSUSERS))
        changed.append(f"made the system user {USER}")
    unit_changed = _write(UNIT, (plan.FILES / "babblerd.service").read_text())
    if unit_changed:
        changed.append(f"wrote {UNIT}")
    wanted = plan.dropins(request.program, key_file, config.ipv4_prefix)
    # Without --key-file the key stays as installed (--force is about the config file).
    keep_key = key_file is None
    for name in OURS:
        path = DROPINS / name
        if name in wanted:
            if _write(path, wanted[name]):
                unit_changed = True
                changed.append(f"wrote {path}")
        elif not (name == "key.conf" and keep_key) and _remove(path):
            unit_changed = True
            changed.append(f"removed {path}")
    config_changed = False
    if config_plan.action == "write" and config_plan.text is not None:
        config_changed = _write(plan.CONFIG_FILE, config_plan.text)
        if config_changed:
            changed += _wrote_config(plan.CONFIG_FILE, config_plan)
    changed += _link_programs(request.program, previous)

    for line in changed:  # said before the wait: a timeout must not hide what was written
        say(line)
    if unit_changed:
        _run("systemctl", "daemon-reload")
    started: list[str] = []
    if _run("systemctl", "is-enabled", SERVICE, check=False).stdout.strip() != "enabled":
        _run("systemctl", "enable", SERVICE)
        started.append("enabled babblerd.service")
    if not _active():
        _run("systemctl", "reset-failed", SERVICE, check=False)
        _run("systemctl", "start", SERVICE)
        started.append("started babblerd")
    else:
        running = _running_version()
        if unit_changed or config_changed or running != __version__:
            _run("systemctl", "reset-failed", SERVICE, check=False)  # its start limit too
            _run("systemctl", "restart", SERVICE)
            started.append(f"restarted babblerd ({plan.restart_reason(running, __version__)})")
    for line in started:
        say(line)
    _wait_for_socket()
    if not changed and not started:
        say("no change: babblerd is installed, enabled and running")
    _print_status(request.program, say)
    return 0


def _wrote_config(path: Path, config_plan: plan.ConfigPlan) -> list[str]:
    """What install says on writing the config file (launchd's too): the file, and each
    setting that changed from the file there (one dropped says so too)."""
    return [f"wrote {path}", *(f"  {line}" for line in config_plan.lines)]


def _user_exists() -> bool:
    try:
        pwd.getpwnam(USER)
    except KeyError:
        return False
    return True


def _active() -> bool:
    return _run("systemctl", "is-active", SERVICE, check=False).stdout.strip() == "active"


def _running_version() -> str | None:
    try:
        return Client(SOCKET, timeout=5.0).status().version
    except ClientError:
        return None


def _wait_for_socket() -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while _running_version() is None:
        if time.monotonic() > deadline:
            raise EnvironmentProblem(
                f"babblerd did not answer on {SOCKET} within {WAIT_SECONDS:g} s: "
                "journalctl -u babblerd says why"
            )
        time.sleep(POLL_SECONDS)


def _print_status(program: Path, say: Say) -> None:
    ctl = program.with_name("babblerctl")
    if not ctl.exists():
        return
    done = _run(str(ctl), "--socket", str(SOCKET), "status", check=False)
    for line in (done.stdout or done.stderr).rstrip("\n").splitlines():
        say(line)


def _link_programs(program: Path, previous: Path | None) -> list[str]:
    """babblerd and babblerctl on root's PATH when the program lives elsewhere (a venv):
    links in /usr/local/bin, made where nothing is, or replacing install's own link to the
    `previous` program (installed from another venv: the link would be left dangling)."""
    made = []
    for name in PROGRAMS:
        source = program.with_name(name)
        link = LINKS / name
        if program.parent == LINKS or not source.exists():
            continue
        if os.path.lexists(link):
            if not _links_to(link, previous, name) or _links_to(link, program, name):
                continue  # someone else's, or already this one
            link.unlink()
        LINKS.mkdir(mode=0o755, parents=True, exist_ok=True)
        link.symlink_to(source)
        made.append(f"linked {link} -> {source}")
    return made


def _links_to(link: Path, program: Path | None, name: str) -> bool:
    """Whether `link` is install's link to `program`'s `name` (babblerd, babblerctl)."""
    return (
        program is not None
        and link.is_symlink()
        and Path(os.readlink(link)) == program.with_name(name)
    )


# -- uninstall ----------------------------------------------------------------------------


def installed_program() -> Path | None:
    """The program the installed unit runs (its program.conf drop-in), if any."""
    text = _read(DROPINS / "program.conf") or ""
    lines = [line for line in text.splitlines() if line.startswith("ExecStart=")]
    value = lines[-1].partition("=")[2].strip() if lines else ""
    return Path(value) if value else None


def uninstall(purge: bool, say: Say) -> int:
    """Stop and remove what install added (babblerd puts the host's settings back as on any
    stop); the system user and the state dir stay (a reinstall keeps the node id), unless
    `purge`, which also removes them and /etc/babbler. Raises EnvironmentProblem."""
    problem = _root_problem("uninstall-system-daemon")
    if problem:
        raise EnvironmentProblem(problem)
    removed: list[str] = []
    program = installed_program()
    if UNIT.exists():
        _run("systemctl", "disable", "--now", SERVICE)
        removed.append("stopped and disabled babblerd")
    for path in (*(DROPINS / name for name in OURS), UNIT, SYSUSERS):
        if _remove(path):
            removed.append(f"removed {path}")
    _remove_if_empty(DROPINS)
    for name in PROGRAMS:
        link = LINKS / name
        if _links_to(link, program, name):
            link.unlink()
            removed.append(f"removed {link}")
    if not purge:
        removed += _drop_config(plan.CONFIG_FILE, say)
        _remove_if_empty(CONFIG_DIR)
    if removed:
        _run("systemctl", "daemon-reload")
        _run("systemctl", "reset-failed", SERVICE, check=False)
    if purge:
        removed += _purge()
    for line in removed or ["not installed: nothing to remove"]:
        say(line)
    return 0


def _drop_config(path: Path, say: Say) -> list[str]:
    """Uninstall's step for the config file (launchd's too): removed when install wrote it
    and no one edited it; kept, and said, otherwise. What it removed."""
    text = _read(path)
    if text is None:
        return []
    if not plan.written_by_install(text):
        say(f"kept {path}: edited by hand (--purge removes it)")
        return []
    _remove(path)
    return [f"removed {path}"]


def _remove_if_empty(directory: Path) -> None:
    with contextlib.suppress(OSError):  # missing, or holds someone's files
        directory.rmdir()


def _purge() -> list[str]:
    out = []
    if _user_exists():
        _run("userdel", USER)
        out.append(f"removed the system user {USER}")
    if _run("getent", "group", USER, check=False).returncode == 0:
        _run("groupdel", USER)
        out.append(f"removed the group {USER}")
    for directory in (STATE_DIR, CONFIG_DIR):
        if directory.is_dir() and not directory.is_symlink():
            shutil.rmtree(directory)
            out.append(f"removed {directory}")
    return out


# -- status -------------------------------------------------------------------------------


def status() -> plan.Status:
    """What is installed and whether it runs; reads only (no root needed)."""
    files = tuple(
        str(path)
        for path in (UNIT, *(DROPINS / name for name in OURS), SYSUSERS, plan.CONFIG_FILE)
        if path.exists()
    )
    installed = UNIT.exists()
    version = _running_version() if installed else None
    problem = None
    if installed and version is None:
        state = _run("systemctl", "is-active", SERVICE, check=False).stdout.strip()
        problem = f"systemctl is-active babblerd: {state or 'unknown'}; journalctl -u babblerd"
    program = installed_program()
    return plan.Status(
        platform=LINUX.key,
        installed=installed,
        running=version is not None,
        service=str(UNIT) if installed else None,
        program=str(program) if program else None,
        version=version,
        files=files,
        problem=problem,
    )
