"""babblerd as a systemd service, in one command each way (docs/operations.md "Install on
your machines"): the system user (sysusers), the shipped unit, its drop-ins where it must
follow a flag, the config file, daemon-reload, enable, start, the wait for the socket;
uninstall (and --purge) and status. What to write is plan.py's; this module does it.
"""

from __future__ import annotations

import os
import pwd
import shutil
from pathlib import Path

from babbler import __version__
from babbler.core.errors import EnvironmentProblem
from babbler.core.platform import LINUX, SOCKET_NAME
from babbler.daemon.keyfile import load_key
from babbler.service import plan
from babbler.service.hostfiles import (
    Say,
    drop_config,
    planned_config,
    print_status,
    read,
    remove,
    remove_if_empty,
    remove_tree,
    run,
    running_version,
    settings,
    wait_for_socket,
    write,
    wrote_config,
)
from babbler.service.program import babeld_problem, program_problem

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
OURS = ("program.conf", "key.conf", "ipv4-prefix.conf")  # the drop-ins install writes


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


# -- install ------------------------------------------------------------------------------


def install(request: plan.Request, say: Say) -> int:
    """Install, or bring up to date, babblerd as the systemd service `babblerd`; say what
    changed (or "no change"), wait until it answers, print its status. Raises
    EnvironmentProblem (refused, nothing changed; or a step failed) and ConfigError."""
    problem = _root_problem("install-system-daemon") or program_problem(request.program)
    if problem:
        raise EnvironmentProblem(problem)
    config_plan, config_text = planned_config(plan.CONFIG_FILE, request)
    config = settings(config_text)
    problem = _babeld_problem(config.babeld)
    if problem:
        raise EnvironmentProblem(problem)
    key_file = request.key_file
    if key_file is not None:
        load_key(key_file)  # raises ConfigError: missing, not root's 0600, not a key

    previous = installed_program()  # before program.conf names this one
    changed: list[str] = []
    if write(SYSUSERS, (plan.FILES / "babbler.sysusers").read_text()):
        changed.append(f"wrote {SYSUSERS}")
    if not _user_exists():
        run("systemd-sysusers", str(SYSUSERS))
        changed.append(f"made the system user {USER}")
    unit_changed = write(UNIT, (plan.FILES / "babblerd.service").read_text())
    if unit_changed:
        changed.append(f"wrote {UNIT}")
    wanted = plan.dropins(request.program, key_file, config.ipv4_prefix)
    # Without --key-file the key stays as installed (--force is about the config file).
    keep_key = key_file is None
    for name in OURS:
        path = DROPINS / name
        if name in wanted:
            if write(path, wanted[name]):
                unit_changed = True
                changed.append(f"wrote {path}")
        elif not (name == "key.conf" and keep_key) and remove(path):
            unit_changed = True
            changed.append(f"removed {path}")
    config_changed = False
    if config_plan.action == "write" and config_plan.text is not None:
        config_changed = write(plan.CONFIG_FILE, config_plan.text)
        if config_changed:
            changed += wrote_config(plan.CONFIG_FILE, config_plan)
    changed += _link_programs(request.program, previous)

    for line in changed:  # said before the wait: a timeout must not hide what was written
        say(line)
    if unit_changed:
        run("systemctl", "daemon-reload")
    started: list[str] = []
    if run("systemctl", "is-enabled", SERVICE, check=False).stdout.strip() != "enabled":
        run("systemctl", "enable", SERVICE)
        started.append("enabled babblerd.service")
    if not _active():
        run("systemctl", "reset-failed", SERVICE, check=False)
        run("systemctl", "start", SERVICE)
        started.append("started babblerd")
    else:
        running = _running_version()
        if unit_changed or config_changed or running != __version__:
            run("systemctl", "reset-failed", SERVICE, check=False)  # its start limit too
            run("systemctl", "restart", SERVICE)
            started.append(f"restarted babblerd ({plan.restart_reason(running, __version__)})")
    for line in started:
        say(line)
    _wait_for_socket()
    if not changed and not started:
        say("no change: babblerd is installed, enabled and running")
    _print_status(request.program, say)
    return 0


def _user_exists() -> bool:
    try:
        pwd.getpwnam(USER)
    except KeyError:
        return False
    return True


def _active() -> bool:
    return run("systemctl", "is-active", SERVICE, check=False).stdout.strip() == "active"


def _running_version() -> str | None:
    return running_version(SOCKET)


def _wait_for_socket() -> None:
    wait_for_socket(SOCKET, "journalctl -u babblerd says why")


def _print_status(program: Path, say: Say) -> None:
    print_status(program, SOCKET, say)


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
    text = read(DROPINS / "program.conf") or ""
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
        run("systemctl", "disable", "--now", SERVICE)
        removed.append("stopped and disabled babblerd")
    for path in (*(DROPINS / name for name in OURS), UNIT, SYSUSERS):
        if remove(path):
            removed.append(f"removed {path}")
    remove_if_empty(DROPINS)
    for name in PROGRAMS:
        link = LINKS / name
        if _links_to(link, program, name):
            link.unlink()
            removed.append(f"removed {link}")
    if not purge:
        removed += drop_config(plan.CONFIG_FILE, say)
        remove_if_empty(CONFIG_DIR)
    if removed:
        run("systemctl", "daemon-reload")
        run("systemctl", "reset-failed", SERVICE, check=False)
    if purge:
        removed += _purge()
    for line in removed or ["not installed: nothing to remove"]:
        say(line)
    return 0


def _purge() -> list[str]:
    out = []
    if _user_exists():
        run("userdel", USER)
        out.append(f"removed the system user {USER}")
    if run("getent", "group", USER, check=False).returncode == 0:
        run("groupdel", USER)
        out.append(f"removed the group {USER}")
    for directory in (STATE_DIR, CONFIG_DIR):
        if remove_tree(directory):
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
        state = run("systemctl", "is-active", SERVICE, check=False).stdout.strip()
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
