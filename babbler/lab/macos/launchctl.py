"""The macOS lab's `launchctl`, its pure part: a LaunchDaemon's plist read strictly into a
`Job`, a command line read into what it asks, and what launchctl prints and how it fails.
The acting part (processes started, restarted, stopped) is `launchd`.

Strict on purpose: a real launchd ignores a key it does not know; here a key outside KEYS,
or one of the wrong type, fails the bootstrap (a test failure, not a silent difference).
Only the lines `babblerd install-system-daemon` and people run are answered (ALLOWED).

The formats, after real Macs' outputs (read, not copied; names are the lab's):
- `Bootstrap failed: 5: Input/output error`, exit 5, for a service already loaded (macOS,
  as root: DeterminateSystems/nix-installer issues 1047 and 1157, `launchctl bootstrap
  system /Library/LaunchDaemons/...`; CatMe0w/zouxian issue 13);
- `Boot-out failed: 3: No such process`, exit 3, for one not loaded (nix-installer issue
  1148 with `bootout system/LABEL`; nix-community/home-manager issue 9585);
- `launchctl print system/LABEL`: `LABEL = {`, a tab-indented block, `state = running`,
  `program`, `arguments = {...}`, `stdout path`, `environment = {` with `K => V`, `domain`,
  `exit timeout`, `runs`, `pid`, `last exit code = (never exited)` (wazuh/wazuh-packages
  issue 2206, Mojave; boxen/puppet-boxen issue 104, 10.10; glowinthedark/pylaunchd pull
  request 1, Ventura 13: the name `system/LABEL` on the first line, tabs, `type =`);
- a service not loaded: `Could not find service "LABEL" in domain for system`, exit 113
  (the words as in Homebrew's and brew-browser's reports; the exit status as hermes-agent
  pull request 26971 reads it). Guessed: the error for a plist that does not parse or
  breaks the lab's rules (launchd logs why; launchctl says only the errno).
"""

from __future__ import annotations

import plistlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from babbler.lab.macos.commands import USAGE, Failed

DOMAIN = "system"
# launchd's own PATH for a daemon without one (launchctl print's "default environment")
DEFAULT_PATH = "/usr/bin:/bin:/usr/sbin:/sbin"
EXIT_TIMEOUT = 20  # launchd.plist(5): ExitTimeOut's default
THROTTLE = 10  # launchd.plist(5): ThrottleInterval's default
# The keys the lab's launchd knows, each with its type (launchd.plist(5)).
KEYS: dict[str, type | tuple[type, ...]] = {
    "Label": str,
    "Program": str,
    "ProgramArguments": list,
    "EnvironmentVariables": dict,
    "RunAtLoad": bool,
    "KeepAlive": bool,
    "ThrottleInterval": int,
    "ExitTimeOut": int,
    "StandardOutPath": str,
    "StandardErrorPath": str,
    "WorkingDirectory": str,
}
ALLOWED = (
    "launchctl bootstrap system PLIST",
    "launchctl bootout system/LABEL",
    "launchctl bootout system PLIST",
    "launchctl print system/LABEL",
)
NO_SUCH_PROCESS = 3
IO_ERROR = 5
NOT_FOUND = 113


@dataclass(frozen=True)
class Job:
    """A LaunchDaemon as its plist says: what the lab's launchd runs."""

    label: str
    path: str  # the plist it came from
    arguments: tuple[str, ...]  # argv; arguments[0] is the program unless `program`
    program: str
    environment: Mapping[str, str] = field(default_factory=dict)
    run_at_load: bool = False
    keep_alive: bool = False
    throttle: int = THROTTLE
    exit_timeout: int = EXIT_TIMEOUT
    stdout: str | None = None
    stderr: str | None = None
    directory: str = "/"


@dataclass(frozen=True)
class State:
    """What launchd knows of a loaded job's process."""

    pid: int | None = None
    runs: int = 0
    last_exit: str = "(never exited)"  # a number, or `(never exited)`


@dataclass(frozen=True)
class Ask:
    """One launchctl command line: `verb` is bootstrap, bootout or print; `label` (bootout,
    print) or `path` (bootstrap, bootout of a plist)."""

    verb: str
    label: str | None = None
    path: str | None = None


def refuse(args: Sequence[str]) -> Failed:
    line = " ".join(["launchctl", *args])
    return Failed(
        f"launchctl: babbler-lab's macOS does not answer `{line}`"
        f" (it answers: {'; '.join(ALLOWED)})",
        USAGE,
    )


def read_args(args: Sequence[str]) -> Ask:
    """What a launchctl command line asks. Raises Failed (exit 64) for any other line."""
    target = f"{DOMAIN}/"
    if len(args) == 3 and args[:2] == ["bootstrap", DOMAIN] and args[2].startswith("/"):
        return Ask("bootstrap", path=args[2])
    if len(args) == 3 and args[:2] == ["bootout", DOMAIN] and args[2].startswith("/"):
        return Ask("bootout", path=args[2])
    if len(args) == 2 and args[0] in ("bootout", "print") and args[1].startswith(target):
        label = args[1][len(target) :]
        if label and "/" not in label:
            return Ask(args[0], label=label)
    raise refuse(args)


def bad(path: str, why: str) -> Failed:
    # launchctl says only the errno; the lab says why as well, on the line before
    return Failed(f"{path}: {why}\nBootstrap failed: {IO_ERROR}: Input/output error", IO_ERROR)


def _strings(path: str, key: str, value: Any) -> None:
    if not all(isinstance(item, str) for item in value):
        raise bad(path, f"{key} must hold strings only")


def job(path: str, data: bytes) -> Job:
    """The plist at `path` (its bytes) as a Job. Raises Failed: not a plist, a key the lab
    does not know or of the wrong type, no Label, no program."""
    try:
        plist = plistlib.loads(data)
    except (plistlib.InvalidFileException, ValueError, TypeError) as error:
        raise bad(path, f"not a property list ({error})") from None
    if not isinstance(plist, dict):
        raise bad(path, "not a dictionary")
    for key, value in plist.items():
        kind = KEYS.get(key)
        if kind is None:
            raise bad(
                path,
                f"key {key} unknown to babbler-lab's launchd (a real launchd ignores it;"
                f" it knows: {', '.join(KEYS)})",
            )
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise bad(path, f"{key} must be a {getattr(kind, '__name__', kind)}")
    label = plist.get("Label")
    if not label:
        raise bad(path, "no Label")
    arguments = plist.get("ProgramArguments", [])
    _strings(path, "ProgramArguments", arguments)
    environment = plist.get("EnvironmentVariables", {})
    _strings(path, "EnvironmentVariables", environment.values())
    program = plist.get("Program") or (arguments[0] if arguments else "")
    if not program.startswith("/"):
        raise bad(path, "no Program, and ProgramArguments[0] is not an absolute path")
    return Job(
        label=label,
        path=path,
        arguments=tuple(arguments) or (program,),
        program=program,
        environment=dict(environment),
        run_at_load=plist.get("RunAtLoad", False),
        keep_alive=plist.get("KeepAlive", False),
        throttle=plist.get("ThrottleInterval", THROTTLE),
        exit_timeout=plist.get("ExitTimeOut", EXIT_TIMEOUT),
        stdout=plist.get("StandardOutPath"),
        stderr=plist.get("StandardErrorPath"),
        directory=plist.get("WorkingDirectory", "/"),
    )


def environment(job: Job) -> dict[str, str]:
    """What launchd gives the job's process: its EnvironmentVariables, PATH launchd's own
    unless they set it, and XPC_SERVICE_NAME (every print shows it)."""
    return {"PATH": DEFAULT_PATH, **job.environment, **_service(job)}


def _service(job: Job) -> dict[str, str]:
    return {"XPC_SERVICE_NAME": job.label}


def already_loaded() -> Failed:
    return Failed(f"Bootstrap failed: {IO_ERROR}: Input/output error", IO_ERROR)


def not_loaded() -> Failed:
    return Failed(f"Boot-out failed: {NO_SUCH_PROCESS}: No such process", NO_SUCH_PROCESS)


def not_found(label: str) -> Failed:
    return Failed(f'Could not find service "{label}" in domain for {DOMAIN}', NOT_FOUND)


def missing(path: str) -> Failed:
    return Failed(f"Bootstrap failed: 2: No such file or directory\n{path}", 2)


def printed(job: Job, state: State) -> str:
    """`launchctl print system/LABEL` for a loaded job."""
    lines = [
        f"{DOMAIN}/{job.label} = {{",
        "\tactive count = 1" if state.pid else "\tactive count = 0",
        f"\tpath = {job.path}",
        "\ttype = LaunchDaemon",
        f"\tstate = {'running' if state.pid else 'not running'}",
        "",
        f"\tprogram = {job.program}",
        "\targuments = {",
        *(f"\t\t{argument}" for argument in job.arguments),
        "\t}",
        "",
    ]
    if job.stdout:
        lines.append(f"\tstdout path = {job.stdout}")
    if job.stderr:
        lines.append(f"\tstderr path = {job.stderr}")
    lines += [
        "\tdefault environment = {",
        f"\t\tPATH => {DEFAULT_PATH}",
        "\t}",
        "",
        "\tenvironment = {",
        *(f"\t\t{k} => {v}" for k, v in {**job.environment, **_service(job)}.items()),
        "\t}",
        "",
        f"\tdomain = {DOMAIN}",
        f"\tminimum runtime = {job.throttle}",
        f"\texit timeout = {job.exit_timeout}",
        f"\truns = {state.runs}",
    ]
    if state.pid:
        lines.append(f"\tpid = {state.pid}")
    lines += [f"\tlast exit code = {state.last_exit}", ""]
    flags = [
        name for name, on in (("keepalive", job.keep_alive), ("runatload", job.run_at_load)) if on
    ]
    lines += [f"\tproperties = {' | '.join(flags) or '(none)'}", "}"]
    return "\n".join(lines) + "\n"
