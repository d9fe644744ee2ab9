"""`babblerd`: the root daemon's command line. Thin: parse, validate, set up, run."""

from __future__ import annotations

import os
import resource
import shutil
import signal
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import click
import structlog
import trio

from babbler import __version__, paths, platform, sdnotify
from babbler.caps import privilege_problem
from babbler.config import DEFAULT_HELLO_INTERVAL, LOG_FORMATS, LOG_LEVELS, MODES, Config, build
from babbler.errors import ConfigError, EnvironmentProblem
from babbler.log import configure
from babbler.nodeid import load_node_id

log = structlog.get_logger("babbler")

EPILOG = """\b
Examples:
  sudo babblerd                          physical Ethernet/Thunderbolt links, on demand
  sudo babblerd --mode always            keep the mesh up from start to stop
  sudo babblerd --interface 'veth*'      exactly these links, whatever their kind
Every flag has a key of the same name in the config file (TOML), e.g. hello-interval = 0.5.
Signals: SIGTERM/SIGINT stop (babeld stopped, addresses removed); SIGHUP reloads the file.
"""


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


async def _serve(config: Config, flags: dict[str, Any]) -> None:
    from babbler.daemon import Daemon

    state_problem = paths.prepare(config.run_dir, config.private_dir, config.state_dir)
    if state_problem:
        log.error("state directory unusable; node id kept in memory only", error=state_problem)
    node = load_node_id(config.state_dir, config.node_id)
    if state_problem and node.persist_error:
        node = replace(node, persist_error=state_problem)  # the cause, not its consequence
    log.info("node id", node_id=f"{node.value:012x}", source=node.source)
    if node.persist_error:
        log.error(
            "could not persist node id; it will change at the next start", error=node.persist_error
        )
    if shutil.which(config.babeld) is None:
        log.error(
            "babeld not found; the mesh cannot start until it is installed", babeld=config.babeld
        )
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        async with platform.open_kernel() as kernel, trio.open_nursery() as nursery:
            daemon = Daemon(config, flags, kernel, node)
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


@click.command(context_settings={"help_option_names": ["-h", "--help"]}, epilog=EPILOG)
@click.option(
    "--config",
    type=click.Path(dir_okay=False, path_type=Path),
    help="TOML config file [default: /etc/babbler/babblerd.toml, if present]",
)
@click.option("--run-dir", metavar="DIR", help="public socket directory [default: /run/babbler]")
@click.option(
    "--state-dir", metavar="DIR", help="node id and babeld state [default: /var/lib/babbler]"
)
@click.option("--babeld", metavar="PATH", help="babeld program [default: babeld on PATH]")
@click.option(
    "--mode",
    type=click.Choice(MODES),
    help="on-demand: mesh runs while a client monitors or watches (and --linger "
    "after); always: from start to stop [default: on-demand]",
)
@click.option(
    "--linger",
    metavar="SECONDS",
    help="seconds the mesh stays up after the last subscriber [default: 5]",
)
@click.option(
    "--interface",
    multiple=True,
    metavar="GLOB",
    help="use exactly the links matching GLOB (repeatable) instead of physical ones",
)
@click.option(
    "--exclude",
    multiple=True,
    metavar="GLOB",
    help="never use links matching GLOB (repeatable; wins over --interface)",
)
@click.option("--node-id", metavar="HEX", help="12 hex digits; overrides <state-dir>/node-id")
@click.option(
    "--hello-interval",
    metavar="SECONDS",
    help=f"babeld hello interval on every link [default: {DEFAULT_HELLO_INTERVAL:g}]",
)
@click.option(
    "--skip-kernel-setup",
    is_flag=True,
    default=None,
    help="babeld leaves IPv6 forwarding and redirect sysctls alone; set them yourself "
    "(the systemd unit does, outside its sandbox)",
)
@click.option(
    "--log-format",
    type=click.Choice(LOG_FORMATS),
    help="[default: console on a terminal, else json]",
)
@click.option(
    "--log-level", type=click.Choice(LOG_LEVELS, case_sensitive=False), help="[default: info]"
)
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
        settings = build(flags, config)
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
        trio.run(_serve, settings, flags)
    except EnvironmentProblem as problem:
        log.error("cannot run", error=str(problem))
        _fail(str(problem), 1)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
