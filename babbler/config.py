"""Daemon configuration: defaults, the optional TOML file, and flags, validated in one place.

Every flag has a config-file key of the same name (DESIGN.md "Paths and flags"). Flags win
over the file, the file over the defaults. Validation raises ConfigError naming the key and
the problem; nothing on the system is touched before a Config exists.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from babbler.addressing import parse_node_id
from babbler.errors import ConfigError
from babbler.platform import DEFAULT_RUN_DIR, DEFAULT_STATE_DIR

DEFAULT_CONFIG = Path("/etc/babbler/babblerd.toml")
SOCKET_NAME = "babblerd.sock"
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


@dataclass(frozen=True)
class Config:
    run_dir: Path = DEFAULT_RUN_DIR
    state_dir: Path = DEFAULT_STATE_DIR
    config: Path | None = None
    babeld: str = "babeld"
    mode: str = "on-demand"
    linger: float = DEFAULT_LINGER
    interface: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    node_id: int | None = None
    hello_interval: float = DEFAULT_HELLO_INTERVAL
    log_format: str | None = None  # None: json unless stderr is a terminal
    log_level: str = "info"
    # babeld leaves the forwarding/redirect sysctls alone (a sandbox sets them, systemd/).
    skip_kernel_setup: bool = False
    # Keys that came from flags, so that a reload keeps them over the file.
    flags: frozenset[str] = field(default=frozenset(), compare=False)

    @property
    def socket_path(self) -> Path:
        return self.run_dir / SOCKET_NAME

    @property
    def private_dir(self) -> Path:
        return self.run_dir / "private"


# config-file key -> Config attribute
KEYS = {
    "run-dir": "run_dir",
    "state-dir": "state_dir",
    "babeld": "babeld",
    "mode": "mode",
    "linger": "linger",
    "interface": "interface",
    "exclude": "exclude",
    "node-id": "node_id",
    "hello-interval": "hello_interval",
    "log-format": "log_format",
    "log-level": "log_level",
    "skip-kernel-setup": "skip_kernel_setup",
}


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


def _bool(key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{key}: expected true or false, got {value!r}")
    return value


def validate(key: str, value: Any) -> Any:
    """Check one setting given under its flag/file name; return it in Config's type."""
    if key in ("run-dir", "state-dir"):
        return _path(key, value)
    if key == "mode":
        return _choice(key, value, MODES)
    if key == "log-format":
        return _choice(key, value, LOG_FORMATS)
    if key == "log-level":
        return _choice(key, str(value).lower(), LOG_LEVELS)
    if key == "linger":
        return _seconds(key, value, 0.0, 86400.0)
    if key == "hello-interval":
        return _seconds(key, value, MIN_HELLO_INTERVAL, MAX_HELLO_INTERVAL)
    if key in ("interface", "exclude"):
        return _globs(key, value)
    if key == "node-id":
        return _node_id(key, value)
    if key == "babeld":
        return _babeld(key, value)
    if key == "skip-kernel-setup":
        return _bool(key, value)
    raise ConfigError(f"unknown key {key!r} (known: {', '.join(sorted(KEYS))})")


def read_file(path: Path) -> dict[str, Any]:
    """Read and parse a TOML config file. Raises ConfigError with the file and the problem."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"config {path}: {error.strerror or error}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"config {path}: not UTF-8 text") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"config {path}: {error}") from None


def build(flags: Mapping[str, Any], config_path: Path | None = None) -> Config:
    """Merge defaults, the config file and the flags that were given.

    `flags` maps file-style keys ("hello-interval") to raw values and holds only the flags
    that were given. An explicit `config_path` must exist; the default one is optional.
    """
    explicit = config_path is not None
    path = config_path if config_path is not None else DEFAULT_CONFIG
    file_values: dict[str, Any] = {}
    if explicit or path.exists():
        file_values = read_file(path)
    values: dict[str, Any] = {}
    for key, raw in file_values.items():
        try:
            values[KEYS[key]] = validate(key, raw)
        except ConfigError as error:
            raise ConfigError(f"config {path}: {error}") from None
    for key, raw in flags.items():
        try:
            values[KEYS[key]] = validate(key, raw)
        except ConfigError as error:
            raise ConfigError(f"--{error}") from None
    return Config(
        config=path if (explicit or path.exists()) else None,
        flags=frozenset(KEYS[k] for k in flags),
        **values,
    )


def reload(current: Config, flags: Mapping[str, Any]) -> Config:
    """Re-read the config file (SIGHUP); flags given at start still win. Raises ConfigError."""
    fresh = build(flags, current.config)
    return replace(fresh, config=current.config)


# Settings that a reload can change while running; the rest need a restart.
RELOADABLE = frozenset(
    {"mode", "linger", "interface", "exclude", "hello_interval", "log_level", "log_format"}
)
