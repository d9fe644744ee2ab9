"""The daemon's run once the command line is done: logging, trio, the kernel, the daemon,
signals and systemd's watchdog. Imported by cli.py only after babeld's early start."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from dataclasses import dataclass

import structlog
import trio

from babbler.core.config import Config
from babbler.core.errors import EnvironmentProblem
from babbler.core.meshkey import MeshKey
from babbler.daemon import sdnotify
from babbler.daemon.babeld.launch import found
from babbler.daemon.early import Early
from babbler.daemon.log import configure
from babbler.daemon.nodeid import NodeId

log = structlog.get_logger("babbler")


@dataclass(frozen=True)
class Start:
    """What cli.py settled before the daemon runs."""

    config: Config
    node: NodeId
    key: MeshKey | None
    state_problem: str | None
    early: Early | None
    early_note: str  # where babeld was started early, or why not


def run(start: Start, reload: Callable[[], Config]) -> None:
    """Serve until SIGTERM/SIGINT. Raises EnvironmentProblem (unwrapped from trio's groups)."""
    configure(start.config.log_format, start.config.log_level)
    try:
        trio.run(_serve, start, reload)
    except KeyboardInterrupt:
        pass
    except BaseException as error:
        cause = environment_problem(error)
        if cause is None:
            raise
        raise cause from None


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


async def _serve(start: Start, reload: Callable[[], Config]) -> None:
    from babbler.daemon.lifecycle import Daemon
    from babbler.daemon.links.backend import open_kernel

    config, node, key = start.config, start.node, start.key
    if start.state_problem:
        log.error(
            "state directory unusable; node id kept in memory only", error=start.state_problem
        )
    key_from = str(key.path) if key is not None else None
    log.info(
        "node id",
        node_id=f"{node.value:012x}",
        source=node.source,
        keyed=key is not None,
        key=key_from,
    )
    if start.early is not None:
        log.info("babeld started early", detail=start.early_note, pid=start.early.popen.pid)
    else:
        log.debug("babeld not started early", reason=start.early_note)
    if node.persist_error:
        log.error(
            "could not persist node id; it will change at the next start", error=node.persist_error
        )
    if not found(config.babeld):
        log.error(
            "babeld not found; the mesh cannot start until it is installed", babeld=config.babeld
        )
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        async with open_kernel(config.platform) as kernel, trio.open_nursery() as nursery:
            daemon = Daemon(config, kernel, node, reload, key, start.early)
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


def environment_problem(error: BaseException) -> EnvironmentProblem | None:
    """The EnvironmentProblem behind `error`, also from inside trio's exception groups."""
    if isinstance(error, EnvironmentProblem):
        return error
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            if found := environment_problem(inner):
                return found
    return None
