"""Daemon configuration: one table of settings, merged from defaults, the optional TOML file
and flags, and validated in one place. Pure: the command line reads the file (`cli.py`).

Every setting has a flag and a config-file key of the same name (DESIGN.md "Paths and
flags"). Flags win over the file, the file over the defaults. Validation raises ConfigError
naming the key and the problem; nothing on the system is touched before a Config exists.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from ipaddress import IPv4Network
from pathlib import Path

from babbler.core.addressing import parse_node_id
from babbler.core.cost import MAX_OVERRIDE
from babbler.core.errors import ConfigError
from babbler.core.ipv4 import DEFAULT_PREFIX as DEFAULT_IPV4_PREFIX
from babbler.core.ipv4 import parse_prefix
from babbler.core.mtu import MAX_MTU, MIN_MTU
from babbler.core.platform import (
    DEFAULT,
    DEFAULT_RUN_DIR,
    DEFAULT_STATE_DIR,
    PLATFORMS,
    SOCKET_NAME,
    Platform,
)

TYPE_CHECKING = False  # typing costs 3 ms of babblerd's start (cli.py)
if TYPE_CHECKING:
    from typing import Any

DEFAULT_CONFIG = Path("/etc/babbler/babblerd.toml")
MODES = ("on-demand", "always")
LOG_FORMATS = ("json", "console")
LOG_LEVELS = ("debug", "info", "warning", "error")
# Measured (docs/benchmarks.md, docs/design.md): at 0.1 s a node joining a converged 4-node
# line is reached 0.8 s after its babblerd is exec'd and a dead node on a 10-node ring is
# routed around in 1.1 s; at 0.25 s those took 1.2 s and 2.2 s. babeld's own default (4 s)
# takes 12-17 s to join. A hello is a few dozen bytes; the mesh only runs while used.
DEFAULT_HELLO_INTERVAL = 0.1
DEFAULT_LINGER = 5.0
# babeld keeps intervals in centiseconds in a 16-bit field; stay well inside it.
MAX_HELLO_INTERVAL = 600.0
MIN_HELLO_INTERVAL = 0.02


# A node goes `down` for `watch` and `status.nodes` only after it has had no usable route
# this long (DESIGN.md "Client protocol"): around a pulled ring cable babeld takes the route
# away and learns the other way round within a few hellos (docs/benchmarks.md "Down
# hold"). `down-hold` sets it; by default DOWN_HOLD_HELLOS hello intervals, at least
# MIN_DOWN_HOLD seconds.
DOWN_HOLD_HELLOS = 10
MIN_DOWN_HOLD = 1.0
MAX_DOWN_HOLD = 3600.0

# Node info (DESIGN.md "Node info over the mesh"): not babel's 6696.
DEFAULT_INFO_PORT = 6698
MAX_NAME = 64
MAX_INFO_FIELDS = 4096  # the user fields, so that an answer stays under its 16 KiB cap
# The bench responder (docs/bench.md), next to node info.
DEFAULT_BENCH_PORT = 6699
BENCH = ("on", "off")


@dataclass(frozen=True)
class Config:
    run_dir: Path = DEFAULT_RUN_DIR
    state_dir: Path = DEFAULT_STATE_DIR
    config: Path | None = None  # the file the settings came from, if any
    babeld: str = "babeld"
    mode: str = "always"
    linger: float = DEFAULT_LINGER
    interface: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    bring_up: tuple[str, ...] = ()  # links brought up once when they appear down (+ Thunderbolt)
    mtu: int | None = None  # None: auto (Thunderbolt cables at the largest both ends take)
    node_id: int | None = None
    hello_interval: float = DEFAULT_HELLO_INTERVAL
    log_format: str | None = None  # None: json unless stderr is a terminal
    log_level: str = "info"
    # babblerd changes no sysctl, for a sandbox that cannot write them; babeld never does.
    skip_kernel_setup: bool = False
    cost: tuple[tuple[str, int], ...] = ()  # (interface glob, babeld rxcost), first match wins
    key_file: Path | None = None  # the mesh key (read by the command line, never logged)
    name: str | None = None  # the node's name in node info; None: the host name
    info_port: int = DEFAULT_INFO_PORT  # TCP port of node info on the node address; 0: off
    info: tuple[tuple[str, str | int | float | bool], ...] = ()  # user fields of node info
    bench: str = "on"  # the bench responder on the node address
    bench_port: int = DEFAULT_BENCH_PORT
    ipv4_prefix: IPv4Network | None = DEFAULT_IPV4_PREFIX  # None: no IPv4 on the mesh
    down_hold: float | None = None  # None: DOWN_HOLD_HELLOS hello intervals (down_hold())
    platform: Platform = DEFAULT  # what babblerd acts as (core/platform.py); the lab sets macOS

    @property
    def socket_path(self) -> Path:
        return self.run_dir / SOCKET_NAME

    @property
    def private_dir(self) -> Path:
        return self.run_dir / "private"


def down_hold(config: Config) -> float:
    """Seconds without a usable route before a node is `down` (the setting, else auto)."""
    if config.down_hold is not None:
        return config.down_hold
    return max(MIN_DOWN_HOLD, DOWN_HOLD_HELLOS * config.hello_interval)


def _down_hold(key: str, value: Any) -> float | None:
    if isinstance(value, str) and value.strip().lower() == "auto":
        return None
    return _seconds(key, value, 0.0, MAX_DOWN_HOLD)


def _path(key: str, value: Any) -> Path:
    if not isinstance(value, str | Path) or not str(value):
        raise ConfigError(f"{key}: expected a non-empty path, got {value!r}")
    path = Path(value)
    if not path.is_absolute():
        path = Path.cwd() / path
    return path


def _choice(key: str, value: Any, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ConfigError(f"{key}: expected one of {', '.join(choices)}, got {value!r}")
    return str(value)


def _seconds(key: str, value: Any, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ConfigError(f"{key}: expected a number of seconds, got {value!r}")
    try:
        number = float(value)
    except ValueError:
        raise ConfigError(f"{key}: expected a number of seconds, got {value!r}") from None
    if not math.isfinite(number) or not low <= number <= high:
        raise ConfigError(f"{key}: must be between {low:g} and {high:g} seconds, got {value!r}")
    return number


def _globs(key: str, value: Any) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list | tuple):
        raise ConfigError(f"{key}: expected an interface name pattern or a list of them")
    for item in items:
        if not isinstance(item, str) or not item.strip():
            raise ConfigError(f"{key}: empty interface name pattern")
        if len(item) > 64 or any(c.isspace() or c in "/\0" for c in item):
            raise ConfigError(f"{key}: not an interface name pattern: {item!r}")
    return tuple(items)


def _node_id(key: str, value: Any) -> int:
    if not isinstance(value, str):
        raise ConfigError(f"{key}: expected 12 hex digits as a string, got {value!r}")
    try:
        return parse_node_id(value)
    except ValueError as error:
        raise ConfigError(f"{key}: {error}") from None


def _babeld(key: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{key}: expected a program name or path, got {value!r}")
    return value


def _pairs(key: str, value: Any, left: str, right: str) -> list[tuple[Any, Any]]:
    """A file table {LEFT = right}, or `LEFT=RIGHT` strings (repeated flags, a file list)."""
    if isinstance(value, dict):
        return list(value.items())
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list | tuple):
        raise ConfigError(f"{key}: expected {left}={right} or a table of {left} = {right}")
    pairs = []
    for item in items:
        name, sep, text = str(item).partition("=")
        if not sep:
            raise ConfigError(f"{key}: expected {left}={right}, got {item!r}")
        pairs.append((name.strip(), text.strip()))
    return pairs


def _costs(key: str, value: Any) -> tuple[tuple[str, int], ...]:
    """`GLOB=N` strings (flags, or a list in the file), or a file table {GLOB = N}."""
    out = []
    for glob, number in _pairs(key, value, "GLOB", "N"):
        _globs(key, [glob])
        try:
            cost = int(number)
        except (TypeError, ValueError):
            raise ConfigError(
                f"{key}: cost of {glob!r} must be a whole number, got {number!r}"
            ) from None
        if isinstance(number, bool) or not 1 <= cost <= MAX_OVERRIDE:
            raise ConfigError(
                f"{key}: cost of {glob!r} must be 1 to {MAX_OVERRIDE}, got {number!r}"
            )
        out.append((glob, cost))
    return tuple(out)


def _name(key: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{key}: expected a name, got {value!r}")
    if len(value) > MAX_NAME or not value.isprintable():
        raise ConfigError(f"{key}: at most {MAX_NAME} printable characters, got {value!r}")
    return value


def _port(key: str, value: Any) -> int:
    try:
        port = int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{key}: expected a TCP port (0 turns it off), got {value!r}") from None
    if isinstance(value, bool | float) or not 0 <= port <= 65535:
        raise ConfigError(f"{key}: expected a TCP port 1-65535, or 0 for off, got {value!r}")
    return port


def _mtu(key: str, value: Any) -> int | None:
    if isinstance(value, str) and value.strip().lower() == "auto":
        return None
    try:
        size = int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{key}: expected auto or a size in bytes, got {value!r}") from None
    if isinstance(value, bool | float) or not MIN_MTU <= size <= MAX_MTU:
        raise ConfigError(f"{key}: expected auto or {MIN_MTU} to {MAX_MTU} bytes, got {value!r}")
    return size


def _info(key: str, value: Any) -> tuple[tuple[str, str | int | float | bool], ...]:
    """`KEY=VALUE` strings (flags) or a file table {KEY = value}: the user fields of node
    info, small enough that the answer stays under its cap."""
    out: list[tuple[str, str | int | float | bool]] = []
    for name, field_value in _pairs(key, value, "KEY", "VALUE"):
        if not isinstance(name, str) or not name or len(name) > 64 or not name.isprintable():
            raise ConfigError(f"{key}: not a field name: {name!r}")
        if not isinstance(field_value, str | int | float | bool):
            raise ConfigError(f"{key}: {name} must be text, a number or true/false")
        # What other nodes refuse on arrival (daemon/nodes/checked.py) is refused here: one
        # such field would have every peer refuse this node's whole info.
        if isinstance(field_value, str) and not field_value.isprintable():
            raise ConfigError(f"{key}: {name} must be printable text, got {field_value!r}")
        if isinstance(field_value, float) and not math.isfinite(field_value):
            raise ConfigError(f"{key}: {name} must be a finite number, got {field_value!r}")
        out.append((name, field_value))
    if len(repr(out)) > MAX_INFO_FIELDS:
        raise ConfigError(f"{key}: the fields take more than {MAX_INFO_FIELDS} bytes")
    return tuple(out)


def _bool(key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{key}: expected true or false, got {value!r}")
    return value


@dataclass(frozen=True)
class Setting:
    """One setting: its flag and file key (`--hello-interval`, `hello-interval`), how its raw
    value is checked and converted, whether SIGHUP can change it, and its help text."""

    key: str
    check: Callable[[str, Any], Any]
    help: str
    reloadable: bool = False
    metavar: str | None = None
    choices: tuple[str, ...] = ()  # the flag takes one of these words
    repeatable: bool = False  # the flag may be given more than once
    switch: bool = False  # a flag without a value

    @property
    def attr(self) -> str:
        return self.key.replace("-", "_")


def _one_of(choices: tuple[str, ...], lower: bool = False) -> Callable[[str, Any], str]:
    return lambda key, value: _choice(key, str(value).lower() if lower else value, choices)


def _platform(key: str, value: Any) -> Platform:
    return PLATFORMS[_choice(key, str(value).lower(), tuple(PLATFORMS))]


def _between(low: float, high: float) -> Callable[[str, Any], float]:
    return lambda key, value: _seconds(key, value, low, high)


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "run-dir", _path, f"public socket directory [default: {DEFAULT_RUN_DIR}]", metavar="DIR"
    ),
    Setting(
        "state-dir",
        _path,
        f"node id and babeld state [default: {DEFAULT_STATE_DIR}]",
        metavar="DIR",
    ),
    Setting("babeld", _babeld, "babeld program [default: babeld on PATH]", metavar="PATH"),
    Setting(
        "mode",
        _one_of(MODES),
        "on-demand: mesh runs while a client monitors or watches (and --linger after); "
        "always: from start to stop [default: always]",
        reloadable=True,
        choices=MODES,
    ),
    Setting(
        "linger",
        _between(0.0, 86400.0),
        f"seconds the mesh stays up after the last subscriber [default: {DEFAULT_LINGER:g}]",
        reloadable=True,
        metavar="SECONDS",
    ),
    Setting(
        "interface",
        _globs,
        "use exactly the links matching GLOB (repeatable) instead of physical ones",
        reloadable=True,
        metavar="GLOB",
        repeatable=True,
    ),
    Setting(
        "exclude",
        _globs,
        "never use links matching GLOB (repeatable; wins over --interface)",
        reloadable=True,
        metavar="GLOB",
        repeatable=True,
    ),
    Setting(
        "bring-up",
        _globs,
        "bring links matching GLOB up once when they appear down, as Thunderbolt links "
        "always are (repeatable; only links the mesh would use; one set down later stays "
        "down; put down again on stop)",
        reloadable=True,
        metavar="GLOB",
        repeatable=True,
    ),
    Setting(
        "mtu",
        _mtu,
        "auto: each Thunderbolt cable runs at the largest MTU both ends take (learned from "
        "the far end's node info); N: every mesh link at most N bytes, at the smaller of "
        "what both ends offer; other links keep their size under auto [default: auto]",
        metavar="auto|N",
    ),
    Setting("node-id", _node_id, "12 hex digits; overrides <state-dir>/node-id", metavar="HEX"),
    Setting(
        "hello-interval",
        _between(MIN_HELLO_INTERVAL, MAX_HELLO_INTERVAL),
        f"babeld hello interval on every link [default: {DEFAULT_HELLO_INTERVAL:g}]",
        reloadable=True,
        metavar="SECONDS",
    ),
    Setting(
        "down-hold",
        _down_hold,
        "seconds a node may be without a usable route before it is reported down (watch, "
        "status.nodes); routes around a pulled cable come back well within it, or auto "
        f"[default: auto, {DOWN_HOLD_HELLOS} hello intervals, at least {MIN_DOWN_HOLD:g} s]",
        reloadable=True,
        metavar="SECONDS",
    ),
    Setting(
        "skip-kernel-setup",
        _bool,
        "babblerd changes no sysctl (IPv6 forwarding, keeping RAs, redirects, DAD and IPv4 "
        "forwarding on mesh links) and logs, once each, which the mesh needs: for a sandbox "
        "that cannot write them; set them yourself (docs/operations.md)",
        switch=True,
    ),
    Setting(
        "cost",
        _costs,
        "babeld cost of links matching GLOB (repeatable; first match wins; config: a table "
        'cost = {"tb*" = 16}) [default: from link speed: 10 Gb/s 32, 1 Gb/s 128, unknown 96]',
        reloadable=True,
        metavar="GLOB=N",
        repeatable=True,
    ),
    Setting(
        "key-file",
        _path,
        "mesh key file (0600; make one with `babblerctl keygen FILE`): only nodes with the "
        "same key are neighbours [default: none, any node may join]",
        metavar="PATH",
    ),
    Setting(
        "name",
        _name,
        "this node's name in node info and `babblerctl nodes` [default: the host name]",
        reloadable=True,
        metavar="NAME",
    ),
    Setting(
        "ipv4-prefix",
        parse_prefix,
        "private IPv4 prefix (/16 to /22) for node and cable addresses, or off "
        f"[default: {DEFAULT_IPV4_PREFIX}]",
        metavar="PREFIX",
    ),
    Setting(
        "info-port",
        _port,
        "TCP port where other nodes read this node's info, on its node address, from the "
        f"mesh only; 0 turns it off [default: {DEFAULT_INFO_PORT}]",
        metavar="PORT",
    ),
    Setting(
        "info",
        _info,
        "a field of this node's info (repeatable; config: a table "
        '[info] role = "worker") [default: none]',
        reloadable=True,
        metavar="KEY=VALUE",
        repeatable=True,
    ),
    Setting(
        "bench",
        _one_of(BENCH, lower=True),
        "answer `babblerctl bench` from other nodes: a responder process of its own, "
        "unprivileged, on the node address, mesh sources only, one session at a time "
        "[default: on]",
        choices=BENCH,
    ),
    Setting(
        "bench-port",
        _port,
        f"TCP port of the bench responder [default: {DEFAULT_BENCH_PORT}]",
        metavar="PORT",
    ),
    Setting(
        "platform",
        _platform,
        "the platform babblerd acts as (its kernel backend, babeld's options, the fence); "
        "another than the running system's is for babbler-lab's macOS nodes "
        f"[default: {DEFAULT.key}, this system's]",
        choices=tuple(PLATFORMS),
    ),
    Setting(
        "log-format",
        _one_of(LOG_FORMATS),
        "[default: console on a terminal, else json]",
        reloadable=True,
        choices=LOG_FORMATS,
    ),
    Setting(
        "log-level",
        _one_of(LOG_LEVELS, lower=True),
        "[default: info]",
        reloadable=True,
        choices=LOG_LEVELS,
    ),
)
BY_KEY = {setting.key: setting for setting in SETTINGS}
BY_ATTR = {setting.attr: setting for setting in SETTINGS}  # click's parameter names


def validate(key: str, value: Any) -> Any:
    """Check one setting given under its flag/file name; return it in Config's type."""
    setting = BY_KEY.get(key)
    if setting is None:
        raise ConfigError(f"unknown key {key!r} (known: {', '.join(sorted(BY_KEY))})")
    return setting.check(key, value)


def merge(
    file_values: Mapping[str, Any], flags: Mapping[str, Any], source: Path | None = None
) -> Config:
    """Defaults, then the file's values, then the flags that were given, each validated.

    Both map file-style keys ("hello-interval") to raw values; `source` is the file the
    values came from (named in errors). Raises ConfigError.
    """
    values = _checked(file_values, f"config {source}: ") | _checked(flags, "--")
    return Config(config=source, **values)


def _checked(raw_values: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Config attribute -> validated value; errors are prefixed with `where`."""
    out = {}
    for key, raw in raw_values.items():
        try:
            value = validate(key, raw)  # raises for an unknown key
        except ConfigError as error:
            raise ConfigError(f"{where}{error}") from None
        out[BY_KEY[key].attr] = value
    return out


def reloaded(current: Config, fresh: Config) -> tuple[Config, list[str]]:
    """The running configuration after a reload to `fresh`: the reloadable settings change;
    the others keep their running values and are returned by key (they need a restart)."""
    updates = {s.attr: getattr(fresh, s.attr) for s in SETTINGS if s.reloadable}
    fixed = [
        s.key
        for s in SETTINGS
        if not s.reloadable and getattr(fresh, s.attr) != getattr(current, s.attr)
    ]
    return replace(current, **updates), fixed


def unknown_settings() -> set[str]:
    """Config fields without a setting, and settings without a field (a test keeps both
    empty)."""
    names = {f.name for f in fields(Config)} - {"config"}
    return names ^ {s.attr for s in SETTINGS}
