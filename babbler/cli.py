"""`babblerd`: the root daemon's command line. Thin: parse, validate, set up, run."""

from __future__ import annotations

import os
import resource
import shutil
import signal
import sys
import tomllib
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import click
import structlog
import trio

from babbler import __version__, instance, paths, platform, sdnotify
from babbler.caps import privilege_problem
from babbler.config import DEFAULT_CONFIG, SETTINGS, Config, merge
from babbler.errors import ConfigError, EnvironmentProblem
from babbler.log import configure
from babbler.meshkey import MeshKey, load_key
from babbler.nodeid import load_node_id

log = structlog.get_logger("babbler")

EPILOG = """\b
Examples:
  sudo babblerd                          physical Ethernet/Thunderbolt links, mesh always up
  sudo babblerd --mode on-demand         mesh up only while a local program subscribes
  sudo babblerd --key-file /etc/babbler/mesh.key   only nodes with this key are neighbours
  sudo babblerd --interface 'veth*'      exactly these links, whatever their kind
Every flag has a key of the same name in the config file (TOML), e.g. hello-interval = 0.5.
Signals: SIGTERM/SIGINT stop (babeld stopped, addresses removed); SIGHUP reloads the file.
"""


def read_config_file(path: Path) -> dict[str, Any]:
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


def load_config(flags: dict[str, Any], config_path: Path | None = None) -> Config:
    """The settings from the config file and the flags that were given (file-style keys).
    An explicit `config_path` must exist; the default file is optional. Raises ConfigError."""
    path = config_path if config_path is not None else DEFAULT_CONFIG
    if config_path is None and not path.exists():
        return merge({}, flags)
    return merge(read_config_file(path), flags, path)


async def _watchdog() -> None:
    """WATCHDOG=1 at half of systemd's WatchdogSec, from the trio loop itself: a stuck loop
    stops the pings and systemd restarts the service."""
    try:
        usec = int(os.environ.get("WATCHDOG_USEC", "0") or 0)
        meant_for = int(os.environ.get("WATCHDOG_PID", "0") or 0)
    except ValueError:
        return
    if usec <= 0 or meant_for not in (0, os.getpid()):
        return
    while True:
        sdnotify.notify("WATCHDOG=1")
        await trio.sleep(usec / 2e6)


async def _serve(config: Config, reload: Callable[[], Config], key: MeshKey | None) -> None:
    from babbler.daemon import Daemon
    from babbler.links.backend import open_kernel

    state_problem = paths.prepare(config.run_dir, config.private_dir, config.state_dir)
    if state_problem:
        log.error("state directory unusable; node id kept in memory only", error=state_problem)
    node = load_node_id(config.state_dir, config.node_id)
    if state_problem and node.persist_error:
        node = replace(node, persist_error=state_problem)  # the cause, not its consequence
    log.info("node id", node_id=f"{node.value:012x}", source=node.source, keyed=key is not None)
    if node.persist_error:
        log.error(
            "could not persist node id; it will change at the next start", error=node.persist_error
        )
    if shutil.which(config.babeld) is None:
        log.error(
            "babeld not found; the mesh cannot start until it is installed", babeld=config.babeld
        )
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        async with open_kernel() as kernel, trio.open_nursery() as nursery:
            daemon = Daemon(config, kernel, node, reload, key)
            await nursery.start(daemon.run)
            nursery.start_soon(_watchdog)
            sdnotify.notify(f"READY=1\nSTATUS=serving {config.socket_path}")
            async for signum in signals:
                if signum == signal.SIGHUP:
                    await daemon.reload()
                    continue
                log.info("stopping", signal=signal.Signals(signum).name)
                sdnotify.notify("STOPPING=1")
                nursery.cancel_scope.cancel()
                break


# Enough descriptors for MAX_CLIENTS clients and the daemon's own; systemd's default soft
# limit (1024) would make accept() fail with EMFILE just below the client limit.
WANTED_FDS = 4096


def _raise_fd_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = WANTED_FDS if hard == resource.RLIM_INFINITY else min(WANTED_FDS, hard)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


def _fail(message: str, code: int) -> None:
    click.echo(f"babblerd: {message}", err=True)
    sys.exit(code)


F = TypeVar("F", bound=Callable[..., Any])


def setting_options(command: F) -> F:
    """One click option per setting of config.SETTINGS, in the table's order."""
    for setting in reversed(SETTINGS):
        kind: dict[str, Any] = {"help": setting.help}
        if setting.switch:
            kind |= {"is_flag": True, "default": None}
        elif setting.choices:
            kind["type"] = click.Choice(setting.choices, case_sensitive=False)
        else:
            kind["metavar"] = setting.metavar
        if setting.repeatable:
            kind["multiple"] = True
        command = click.option(f"--{setting.key}", setting.attr, **kind)(command)
    return command


@click.command(context_settings={"help_option_names": ["-h", "--help"]}, epilog=EPILOG)
@click.option(
    "--config",
    type=click.Path(dir_okay=False, path_type=Path),
    help=f"TOML config file [default: {DEFAULT_CONFIG}, if present]",
)
@setting_options
@click.version_option(__version__, prog_name="babblerd")
def main(config: Path | None, **given: Any) -> None:
    """Give each wired link a mesh address and route between nodes with babeld.

    Serves the node's state, babeld's table and live changes on <run-dir>/babblerd.sock
    (read it with babblerctl).
    """
    flags = {
        key.replace("_", "-"): value
        for key, value in given.items()
        if value is not None and value != ()
    }
    try:
        settings = load_config(flags, config)
        key = load_key(settings.key_file) if settings.key_file else None
    except ConfigError as error:
        _fail(str(error), 2)
        return
    configure(settings.log_format, settings.log_level)
    if not platform.supported():
        _fail(f"{platform.NAME} is not supported (Linux and macOS are)", 1)
    problem = privilege_problem()
    if problem:
        _fail(problem, 1)
    _raise_fd_limit()
    try:
        held = instance.claim()  # before anything is touched
    except EnvironmentProblem as problem:
        _fail(str(problem), 1)
        return
    try:
        trio.run(_serve, settings, lambda: load_config(flags, config), key)
    except KeyboardInterrupt:
        pass
    except BaseException as error:
        cause = environment_problem(error)
        if cause is None:
            raise
        _fail(str(cause), 1)
    finally:
        held.release()


def environment_problem(error: BaseException) -> EnvironmentProblem | None:
    """The EnvironmentProblem behind `error`, also from inside trio's exception groups."""
    if isinstance(error, EnvironmentProblem):
        return error
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            if found := environment_problem(inner):
                return found
    return None


if __name__ == "__main__":
    main()
