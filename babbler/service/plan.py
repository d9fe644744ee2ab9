"""What `babblerd install-system-daemon` would write, and how it differs from what is there.

Pure: the config file's text from the flags given (/etc/babbler/babblerd.toml), whether a
file there is one install wrote or one a person edited, what differs (phrased for the user),
the unit's drop-ins (Linux) and whether the program a service would run is root's alone.
The I/O is systemd.py's and launchd.py's; the subcommands are command.py's.
"""

from __future__ import annotations

import re
import stat
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from ipaddress import IPv4Network
from pathlib import Path
from typing import Any

from babbler.core.config import BY_KEY, DEFAULT_CONFIG, SETTINGS
from babbler.core.errors import ConfigError
from babbler.core.ipv4 import DEFAULT_PREFIX

FILES = Path(__file__).parent / "files"  # the shipped unit, sysusers file and plist
CONFIG_FILE = DEFAULT_CONFIG  # /etc/babbler/babblerd.toml: what babblerd reads by default
# The first line of a config file install wrote; a file without it, or whose settings
# would be written otherwise, is a person's and is kept unless --force.
HEADER = "# Written by `babblerd install-system-daemon`"
HEADER_TEXT = (
    f"{HEADER} from its flags. Edit it freely: install then\n"
    "# keeps it and says what differs from its flags (--force replaces it); SIGHUP reloads.\n"
)
# Settings a service's files fix: the unit's RuntimeDirectory and StateDirectory, the key
# as a credential (never in the file: the service's user cannot read a root-only key).
NOT_IN_FILE = ("run-dir", "state-dir", "key-file", "platform")
# Settings written as TOML numbers when the flag's text is a number (node-id stays text:
# 12 hex digits can be all decimal digits).
NUMERIC = ("linger", "hello-interval", "down-hold", "mtu", "info-port", "bench-port")
NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?")
CREDENTIAL = "mesh.key"  # daemon/keyfile.py's CREDENTIAL: the name babblerd looks for
# The IPv4 prefix the shipped unit's IPAddressAllow already holds.
UNIT_IPV4_PREFIX = DEFAULT_PREFIX


@dataclass(frozen=True)
class Request:
    """One `install-system-daemon`: the babblerd flags given (setting key -> raw value, as
    daemon/argv.py reads them, key-file among them), --force, and the program to run."""

    flags: Mapping[str, Any]
    force: bool = False
    program: Path = Path("/usr/local/bin/babblerd")

    @property
    def key_file(self) -> Path | None:
        value = self.flags.get("key-file")
        return Path(value) if value else None

    @property
    def file_flags(self) -> dict[str, Any]:
        """The flags that go into the config file."""
        return {k: v for k, v in self.flags.items() if k not in NOT_IN_FILE}


@dataclass(frozen=True)
class Status:
    """`system-daemon-status`: what is installed, where, which version, whether it runs."""

    platform: str
    installed: bool
    running: bool
    service: str | None = None  # the unit file or the plist
    program: str | None = None  # what the service runs
    version: str | None = None  # the running babblerd's (its `status`), else None
    files: tuple[str, ...] = ()  # every file install wrote that is there
    problem: str | None = None  # why it is not running, when known

    def as_json(self) -> dict[str, Any]:
        return {
            "platform": self.platform,
            "installed": self.installed,
            "running": self.running,
            "service": self.service,
            "program": self.program,
            "version": self.version,
            "files": list(self.files),
            "problem": self.problem,
        }

    def lines(self) -> list[str]:
        """For people."""
        if not self.installed:
            return [f"not installed ({self.platform}): sudo babblerd install-system-daemon"]
        state = f"running, version {self.version}" if self.running else "not running"
        out = [f"installed: {self.service}", f"program: {self.program}", state]
        if self.problem:
            out.append(self.problem)
        return out


# -- the config file ----------------------------------------------------------------------


def _toml_value(key: str, value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple | list):
        return "[" + ", ".join(_toml_string(str(item)) for item in value) + "]"
    text = str(value)
    if key in NUMERIC and NUMBER.fullmatch(text):
        return text
    return _toml_string(text)


def _toml_string(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    escaped = "".join(c if c.isprintable() else _escape(c) for c in escaped)
    return f'"{escaped}"'


def _escape(char: str) -> str:
    """TOML's escape: \\u and 4 hex digits, \\U and 8 above U+FFFF."""
    code = ord(char)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


ORDER = {setting.key: index for index, setting in enumerate(SETTINGS)}


def config_text(flags: Mapping[str, Any]) -> str:
    """The config file install writes for `flags` (file keys -> raw flag values): the header,
    then one `key = value` line per setting given, in the settings table's order."""
    lines = [
        f"{key} = {_toml_value(key, flags[key])}"
        for key in sorted(flags, key=lambda k: ORDER.get(k, len(ORDER)))
        if key not in NOT_IN_FILE
    ]
    return HEADER_TEXT + "".join(line + "\n" for line in lines)


def parse_config(text: str) -> dict[str, Any]:
    """A config file's settings. Raises ConfigError (not TOML)."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"config {CONFIG_FILE}: {error}") from None


def written_by_install(text: str) -> bool:
    """Whether `text` is exactly what install writes for some flags: ours, unedited."""
    if not text.startswith(HEADER):
        return False
    try:
        values = parse_config(text)
    except ConfigError:
        return False
    flags = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
    return all(k in BY_KEY for k in flags) and config_text(flags) == text


def _shown(value: Any) -> str:
    if isinstance(value, tuple | list):
        return "[" + ", ".join(repr(str(item)) for item in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, str) else str(value)


def _same(left: Any, right: Any) -> bool:
    def norm(value: Any) -> Any:
        if isinstance(value, tuple | list):
            return tuple(str(item) for item in value)
        return value if isinstance(value, bool) else str(value)

    return bool(norm(left) == norm(right))


def differences(there: Mapping[str, Any], wanted: Mapping[str, Any]) -> list[str]:
    """What differs between a config file's settings and what install would write, one
    line per setting, in the settings table's order."""
    keys = sorted(set(there) | set(wanted), key=lambda k: (ORDER.get(k, len(ORDER)), k))
    out = []
    for key in keys:
        if key not in wanted:
            out.append(f"{key}: the file sets {_shown(there[key])}, the flags do not")
        elif key not in there:
            out.append(f"{key}: the flags set {_shown(wanted[key])}, the file does not")
        elif not _same(there[key], wanted[key]):
            out.append(
                f"{key}: the file sets {_shown(there[key])}, the flags {_shown(wanted[key])}"
            )
    return out


@dataclass(frozen=True)
class ConfigPlan:
    """What install does with the config file: `action` is "none" (no file, none wanted),
    "keep" (it stays as it is), "write" (text replaces what is there; `lines`: what that
    changes, per setting) or "refuse" (a person's file differs from the flags and there is
    no --force: `lines` say how)."""

    action: str
    text: str | None = None
    lines: tuple[str, ...] = ()


def plan_config(there: str | None, request: Request) -> ConfigPlan:
    """The config file step. No flags for the file: what is there stays (a person's
    settings, or none), also with --force. Flags: written when there is no file or the file
    is install's own; a person's file that says otherwise is replaced only with --force."""
    flags = request.file_flags
    wanted = config_text(flags)
    if not flags or there == wanted:
        return ConfigPlan("none" if there is None else "keep")
    if there is None or written_by_install(there) or request.force:
        return ConfigPlan("write", wanted, _replaced(there, flags))
    try:
        found = parse_config(there)
    except ConfigError as error:
        found_lines = [f"{error} (install would write the flags' settings)"]
    else:
        found_lines = differences(found, flags) or [
            "the same settings, written differently (comments or layout)"
        ]
    return ConfigPlan(
        "refuse",
        None,
        (
            f"{CONFIG_FILE} was edited by hand and differs from the flags:",
            *(f"  {line}" for line in found_lines),
            "run install again without these flags to keep it, or with --force to replace it",
        ),
    )


def _replaced(there: str | None, flags: Mapping[str, Any]) -> tuple[str, ...]:
    """What writing the flags changes in the file there, one line per setting."""
    if there is None:
        return ()
    try:
        found = parse_config(there)
    except ConfigError:
        return ("it was not TOML",)
    return tuple(differences(found, flags))


def restart_reason(running: str | None, version: str) -> str:
    """Why install restarts a service that is up: `running` is the version its socket
    answered with (None: it did not answer), `version` this babbler's."""
    if running is None:
        return "it did not answer"
    return "its files changed" if running == version else f"was {running}"


# -- the unit's drop-ins (Linux) ----------------------------------------------------------


def dropins(
    program: Path, key_file: Path | None, ipv4_prefix: IPv4Network | None
) -> dict[str, str]:
    """The drop-ins under babblerd.service.d that make the shipped unit follow the flags:
    the program (the unit names /usr/local/bin/babblerd), the key as a credential, and the
    IPv4 prefix the sandbox must allow when it is not the unit's own. File name -> text."""
    out = {
        "program.conf": (
            "# The babblerd install-system-daemon was run from.\n"
            f"[Service]\nExecStart=\nExecStart={program}\n"
        )
    }
    if key_file is not None:
        out["key.conf"] = (
            "# The mesh key, handed to babblerd as a credential (the file stays root's).\n"
            f"[Service]\nLoadCredential={CREDENTIAL}:{key_file}\n"
        )
    if ipv4_prefix is not None and ipv4_prefix != UNIT_IPV4_PREFIX:
        out["ipv4-prefix.conf"] = (
            "# The sandbox lets babblerd and babeld reach this node's IPv4 prefix.\n"
            f"[Service]\nIPAddressAllow={ipv4_prefix}\n"
        )
    return out


# -- the program, root's alone ------------------------------------------------------------


@dataclass(frozen=True)
class PathFacts:
    """One path on the way to the program, as lstat saw it."""

    path: Path
    uid: int
    mode: int


@dataclass(frozen=True)
class Chain:
    """Every path from / down to a file the service would run or import (resolved)."""

    target: Path
    steps: tuple[PathFacts, ...] = field(default_factory=tuple)


# Directories systemd's ProtectHome hides from the unit, where a user's venv would be.
HIDDEN = (Path("/home"), Path("/root"), Path("/run/user"))
# The one command that puts babbler where a service may run it (docs/operations.md): from
# a checkout or its wheel. Never `pip install babbler`: that name on PyPI is another project.
ROOT_INSTALL = (
    "sudo python3 -m venv /usr/local/lib/babbler && "
    "sudo /usr/local/lib/babbler/bin/pip install /path/to/babbler-checkout && "
    "sudo /usr/local/lib/babbler/bin/babblerd install-system-daemon"
)
# On a Mac, Homebrew's Python (and /usr/local/lib on an Intel Mac) is the user's, so a venv
# made with it is refused again: python.org's Python made root's alone, a venv in /opt
# (docs/macos.md "What the lab cannot show").
ROOT_INSTALL_MACOS = (
    "sudo chmod -R go-w /Library/Frameworks/Python.framework && "
    "sudo /Library/Frameworks/Python.framework/Versions/Current/bin/python3 -m venv "
    "/opt/babbler && sudo /opt/babbler/bin/pip install /path/to/babbler-checkout && "
    "sudo /opt/babbler/bin/babblerd install-system-daemon (python.org's Python; "
    "Homebrew's is the user's)"
)


def untrusted(
    chains: Sequence[Chain], hidden: Sequence[Path] = HIDDEN, fix: str | None = None
) -> str | None:
    """Why a service must not run this program, in one line, or None: each path from / to
    the interpreter, the babblerd script and the babbler package must be root's and not
    writable by group or others (else that user or group could run code as root), and
    none may lie where the unit cannot see (ProtectHome). A sticky directory of root's
    (/tmp) may be writable by all when what lies below it is root's: others can add beside
    it but not rename or replace it (the rule of ssh's StrictModes). `fix`: the way out
    said (default: install babbler for root, ROOT_INSTALL)."""
    fix = fix or f"install babbler for root: {ROOT_INSTALL}"
    for chain in chains:
        for unseen in hidden:  # systemd's ProtectHome; launchd hides nothing
            if chain.target.is_relative_to(unseen):
                return f"{chain.target} is under {unseen}, which the service cannot see; {fix}"
        for step, below in zip(chain.steps, (*chain.steps[1:], None), strict=True):
            mode = stat.S_IMODE(step.mode)
            if _sticky_above_entry(step, below):
                continue
            if step.uid != 0 or mode & 0o022:
                who = (
                    f"owned by uid {step.uid}"
                    if step.uid != 0
                    else "writable by others"
                    if mode & 0o002
                    else "writable by its group"
                )
                return (
                    f"{step.path} ({who}) would let a user run code as root through "
                    f"{chain.target}; {fix}"
                )
    return None


def _sticky_above_entry(step: PathFacts, below: PathFacts | None) -> bool:
    """A root-owned sticky directory with an entry below it on the way (which is then
    judged by its own owner and mode)."""
    return below is not None and step.uid == 0 and bool(step.mode & stat.S_ISVTX)
