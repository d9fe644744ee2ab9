"""`babblerd`: the root daemon's command line. Thin: parse, validate, set up, run.

Lean on purpose: everything up to babeld's early start (early.py) imports neither trio nor
structlog nor pyroute2 (serve.py does, once babeld is running), nor click nor typing (a plain
command line is read by argv.py; click, in cli_command.py, answers help and errors).
"""

from __future__ import annotations

import os
import resource
import signal
import sys
from dataclasses import replace
from pathlib import Path

from babbler.core.config import DEFAULT_CONFIG, Config, merge
from babbler.core.errors import ConfigError, EnvironmentProblem
from babbler.core.platform import LINUX, RUNNING, SYSTEM_NAME, Platform
from babbler.daemon import argv, instance, paths
from babbler.daemon.caps import privilege_problem
from babbler.daemon.early import Early
from babbler.daemon.early import start as start_early
from babbler.daemon.keyfile import mesh_key
from babbler.daemon.nodeid import load_node_id

TYPE_CHECKING = False  # typing itself costs 3 ms of the start
if TYPE_CHECKING:
    from typing import Any


def read_config_file(path: Path) -> dict[str, Any]:
    """Read and parse a TOML config file. Raises ConfigError with the file and the problem."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"config {path}: {error.strerror or error}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"config {path}: not UTF-8 text") from None
    import tomllib  # only when there is a file: 10 ms of start-up otherwise

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"config {path}: {error}") from None


def load_config(flags: dict[str, Any], config_path: Path | None = None) -> Config:
    """The settings from the config file and the flags that were given (file-style keys).
    An explicit `config_path` must exist; the default file is optional. Raises ConfigError."""
    path = config_path if config_path is not None else DEFAULT_CONFIG
    if config_path is None and not path.exists():
        return merge({}, flags)
    return merge(read_config_file(path), flags, path)


# Enough descriptors for fanout.Limits.max_clients clients and the daemon's own; systemd's
# default soft limit (1024) would make accept() fail with EMFILE just below the client limit.
WANTED_FDS = 4096


def _raise_fd_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = WANTED_FDS if hard == resource.RLIM_INFINITY else min(WANTED_FDS, hard)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


def _stop_during_start(signum: int, frame: object) -> None:
    raise SystemExit(0)


def _fail(message: str, code: int) -> None:
    print(f"babblerd: {message}", file=sys.stderr, flush=True)
    sys.exit(code)


# click's shell completion (docs/operations.md): set, babblerd prints a script, never starts.
COMPLETION_VARIABLE = "_BABBLERD_COMPLETE"


def run() -> None:
    """The `babblerd` program: a plain command line is read here, anything else by click;
    a subcommand (install-system-daemon, ...) by babbler/service/command.py."""
    if sys.argv[1:2] and sys.argv[1] in argv.SUBCOMMANDS:
        from babbler.service.command import run as run_subcommand  # never the daemon

        run_subcommand(sys.argv[1:])
    parsed = None if COMPLETION_VARIABLE in os.environ else argv.parse(sys.argv[1:])
    if parsed is None:
        from babbler.daemon.cli_command import parse  # help, version, completion, errors

        parsed = parse(sys.argv[1:])
    start(*parsed)


def platform_problem(chosen: Platform) -> str | None:
    """Why babblerd cannot act as `chosen` here, or None. macOS acts on commands (ifconfig,
    route, sysctl), which babbler-lab provides on Linux; Linux needs Linux's netlink."""
    if RUNNING is None:
        return f"{SYSTEM_NAME} is not supported (Linux and macOS are)"
    if chosen is LINUX and RUNNING is not LINUX:
        return f"--platform linux needs Linux (this is {RUNNING.name})"
    return None


def start(config: Path | None, flags: dict[str, Any]) -> None:
    """Validate, set up and run the daemon; `flags` maps setting keys to raw flag values."""
    try:
        settings = load_config(flags, config)
        key = mesh_key(settings.key_file)
    except ConfigError as error:
        _fail(str(error), 2)
        return
    problem = platform_problem(settings.platform)
    if problem:
        _fail(problem, 1)
    problem = privilege_problem()
    if problem:
        _fail(problem, 1)
    _raise_fd_limit()
    try:
        held = instance.claim()  # before anything is touched
    except EnvironmentProblem as problem:
        _fail(str(problem), 1)
        return
    early: Early | None = None
    # Until trio takes the signals over, SIGTERM/SIGINT end babblerd through the `finally`
    # below, so a babeld started early is stopped cleanly (no stale files, no stale routes).
    signal.signal(signal.SIGTERM, _stop_during_start)
    signal.signal(signal.SIGINT, _stop_during_start)
    try:
        state_problem = paths.prepare(settings.run_dir, settings.private_dir, settings.state_dir)
        node = load_node_id(settings.state_dir, settings.node_id)
        if state_problem and node.persist_error:
            node = replace(node, persist_error=state_problem)  # the cause, not its consequence
        early, early_note = start_early(settings, node, key)
        # trio, structlog and pyroute2 from here on: babeld is already running.
        from babbler.daemon import serve

        begun = serve.Start(settings, node, key, state_problem, early, early_note)
        serve.run(begun, lambda: load_config(flags, config))
    except EnvironmentProblem as problem:
        _fail(str(problem), 1)
    finally:
        if early is not None:
            early.stop()
            early.withdraw()
        held.release()


if __name__ == "__main__":
    run()
