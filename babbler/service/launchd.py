"""babblerd as a macOS LaunchDaemon, in one command each way: the plist (from the shipped
one, babbler/service/files/org.babbler.babblerd.plist, with the program, the platform and
the mesh key on its command line) in /Library/LaunchDaemons, the config file from the other
flags (plan.py, as on Linux), `launchctl bootstrap system`, the wait for the socket;
uninstall (`launchctl bootout`, and --purge) and status. systemd.py is the Linux side.

babblerd runs as root on a Mac (no system user): it reads the key file named on its
command line (`--key-file`, the file stays where it is, root's 0600, checked at install).

The macOS lab (docs/macos.md "launchd in the lab") sets BABBLER_MAC_ROOT on its nodes: every
path here is then under that node's directory, and the plist names babblerd's directories
and config file under it too (babblerd's defaults are the host's). Unset on a Mac.
"""

from __future__ import annotations

import os
import plistlib
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from babbler import __version__
from babbler.core.errors import EnvironmentProblem
from babbler.core.platform import MACOS, SOCKET_NAME
from babbler.daemon.keyfile import load_key
from babbler.service import plan
from babbler.service.hostfiles import (
    Say,
    drop_config,
    make_dir,
    planned_config,
    print_status,
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

LABEL = "org.babbler.babblerd"
SHIPPED = plan.FILES / f"{LABEL}.plist"
ROOT_VARIABLE = "BABBLER_MAC_ROOT"  # the macOS lab's per-node root; unset on a Mac
LOG = Path("/var/log/babblerd.log")
BABELD_COPY = "/opt/babbler/bin/babeld"  # root's copy of Homebrew's (docs/operations.md)


@dataclass(frozen=True)
class Paths:
    """Where a Mac keeps what install writes, under `root` (/ on a Mac)."""

    root: Path = Path("/")

    def _at(self, path: Path) -> Path:
        return self.root / path.relative_to("/")

    @property
    def plist(self) -> Path:
        return self._at(Path("/Library/LaunchDaemons") / f"{LABEL}.plist")

    @property
    def config(self) -> Path:
        return self._at(plan.CONFIG_FILE)

    @property
    def run_dir(self) -> Path:
        return self._at(MACOS.run_dir)

    @property
    def state_dir(self) -> Path:
        return self._at(MACOS.state_dir)

    @property
    def log(self) -> Path:
        return self._at(LOG)

    @property
    def socket(self) -> Path:
        return self.run_dir / SOCKET_NAME

    @property
    def lab(self) -> bool:
        return self.root != Path("/")


def paths() -> Paths:
    root = os.environ.get(ROOT_VARIABLE)
    return Paths(Path(root)) if root else Paths()


def plist_bytes(program: Path, key_file: Path | None, where: Paths, config: bool) -> bytes:
    """The LaunchDaemon's plist: the shipped one with this program, the platform, the key
    file and, in the lab, babblerd's paths under the node's root (`config`: whether the
    config file is there to name)."""
    shipped: dict[str, Any] = plistlib.loads(SHIPPED.read_bytes())
    arguments = [str(program), "--log-format", "json", "--platform", MACOS.key]
    if key_file is not None:
        arguments += ["--key-file", str(key_file)]
    if where.lab:
        arguments += ["--run-dir", str(where.run_dir), "--state-dir", str(where.state_dir)]
        if config:
            arguments += ["--config", str(where.config)]
    shipped["ProgramArguments"] = arguments
    shipped["StandardOutPath"] = shipped["StandardErrorPath"] = str(where.log)
    return plistlib.dumps(shipped)


def _service_path() -> str:
    shipped: dict[str, Any] = plistlib.loads(SHIPPED.read_bytes())
    return str(shipped["EnvironmentVariables"]["PATH"])


def _installed_arguments(where: Paths) -> list[str]:
    try:
        found = plistlib.loads(where.plist.read_bytes())
    except (OSError, plistlib.InvalidFileException, ValueError):
        return []
    arguments = found.get("ProgramArguments") if isinstance(found, dict) else None
    return [str(a) for a in arguments] if isinstance(arguments, list) else []


def _installed_key(where: Paths) -> Path | None:
    arguments = _installed_arguments(where)
    if "--key-file" in arguments[:-1]:
        return Path(arguments[arguments.index("--key-file") + 1])
    return None


# -- refusals -----------------------------------------------------------------------------


def _root_problem(what: str) -> str | None:
    if os.geteuid() != 0:
        return f"run it as root: sudo babblerd {what}"
    if shutil.which("launchctl") is None:
        return "launchctl not found: this is not a Mac (on Linux: sudo babblerd " + what + ")"
    return None


def _babeld_problem(babeld: str) -> str | None:
    found = shutil.which(babeld, path=_service_path())
    if found is not None:  # Homebrew's is the user's: root's copy (docs/operations.md)
        return babeld_problem(
            found,
            (),
            f"copy it for root: sudo install -o root -g wheel -m 0755 {found} "
            f"{BABELD_COPY}, then install with --babeld {BABELD_COPY}",
        )
    return f"{babeld} not found on the service's PATH: brew install babeld"


# -- install ------------------------------------------------------------------------------


def install(request: plan.Request, say: Say) -> int:
    """Install, or bring up to date, babblerd as the LaunchDaemon; say what changed (or
    "no change"), wait until it answers, print its status. Raises EnvironmentProblem
    (refused, nothing changed; or a step failed) and ConfigError."""
    where = paths()
    problem = _root_problem("install-system-daemon") or program_problem(
        request.program, (), f"install babbler for root: {plan.ROOT_INSTALL_MACOS}"
    )
    if problem:
        raise EnvironmentProblem(problem)
    config_plan, config_text = planned_config(where.config, request)
    problem = _babeld_problem(settings(config_text).babeld)
    if problem:
        raise EnvironmentProblem(problem)
    # Without --key-file the key stays as installed (--force is about the config file).
    key_file = request.key_file or _installed_key(where)
    if key_file is not None:
        key_file = key_file.absolute()
        load_key(key_file)  # raises ConfigError: missing, not root's 0600, not a key

    changed: list[str] = []
    config_changed = False
    if config_plan.action == "write" and config_plan.text is not None:
        config_changed = write(where.config, config_plan.text)
        if config_changed:
            changed += wrote_config(where.config, config_plan)
    wanted = plist_bytes(request.program, key_file, where, config_text is not None)
    plist_changed = write(where.plist, wanted.decode())
    make_dir(where.log.parent)  # a Mac has /var/log; the lab's root may not
    if plist_changed:
        changed.append(f"wrote {where.plist}")

    for line in changed:  # said before the wait: a timeout must not hide what was written
        say(line)
    started = ""
    if not _loaded():
        _launchctl("bootstrap", "system", str(where.plist))
        started = "started babblerd (launchctl bootstrap)"
    else:
        running = _running_version(where)
        if plist_changed or config_changed or running != __version__:
            _launchctl("bootout", f"system/{LABEL}")
            _launchctl("bootstrap", "system", str(where.plist))
            started = f"restarted babblerd ({plan.restart_reason(running, __version__)})"
    if started:
        say(started)
    _wait_for_socket(where)
    if not changed and not started:
        say("no change: babblerd is installed and running")
    _print_status(request.program, where, say)
    return 0


def _launchctl(*args: str) -> None:
    run("launchctl", *args)


def _loaded() -> bool:
    return run("launchctl", "print", f"system/{LABEL}", check=False).returncode == 0


def _running_version(where: Paths) -> str | None:
    return running_version(where.socket)


def _wait_for_socket(where: Paths) -> None:
    wait_for_socket(where.socket, f"{where.log} and `sudo launchctl print system/{LABEL}` say why")


def _print_status(program: Path, where: Paths, say: Say) -> None:
    print_status(program, where.socket, say)


# -- uninstall ----------------------------------------------------------------------------


def uninstall(purge: bool, say: Say) -> int:
    """Boot out (babblerd puts the host's settings back as on any stop) and remove what
    install added: the plist, its config file, the run dir and the log launchd wrote; the
    state dir stays (a reinstall keeps the node id) unless `purge`, which also removes it
    and /etc/babbler. Raises EnvironmentProblem."""
    where = paths()
    problem = _root_problem("uninstall-system-daemon")
    if problem:
        raise EnvironmentProblem(problem)
    removed: list[str] = []
    if _loaded():
        _launchctl("bootout", f"system/{LABEL}")
        removed.append("stopped babblerd (launchctl bootout)")
    if remove(where.plist):
        removed.append(f"removed {where.plist}")
    if remove(where.log):
        removed.append(f"removed {where.log}")
    if not purge:
        removed += drop_config(where.config, say)
        remove_if_empty(where.config.parent)
    # The run dir babblerd made (launchd has no RuntimeDirectory to remove it on a stop).
    for directory in (where.run_dir, *((where.state_dir, where.config.parent) if purge else ())):
        if remove_tree(directory):
            removed.append(f"removed {directory}")
    for line in removed or ["not installed: nothing to remove"]:
        say(line)
    return 0


# -- status -------------------------------------------------------------------------------


def status() -> plan.Status:
    """What is installed and whether it runs; reads only."""
    where = paths()
    files = tuple(str(path) for path in (where.plist, where.config) if path.exists())
    installed = where.plist.exists()
    version = _running_version(where) if installed else None
    problem = None
    if installed and version is None:
        problem = (
            f"babblerd does not answer on {where.socket}: "
            f"sudo launchctl print system/{LABEL}; {where.log}"
        )
    arguments = _installed_arguments(where)
    return plan.Status(
        platform=MACOS.key,
        installed=installed,
        running=version is not None,
        service=str(where.plist) if installed else None,
        program=arguments[0] if arguments else None,
        version=version,
        files=files,
        problem=problem,
    )
