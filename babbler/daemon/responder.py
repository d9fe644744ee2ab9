"""babblerd's side of the bench responder (docs/bench.md): run it as its own unprivileged
process on the node addresses while the mesh runs, restart it if it exits, never leave it
behind (a child like babeld: daemon/spawn.py, daemon/children.py). The program itself is
bench/responder.py; the daemon knows it only by its module name, so bench/ imports nothing
of the daemon's and the daemon nothing of the bench's.

`while_mesh_runs` is what the daemon starts with the mesh: the responder on the node
addresses as `Place` (a port) reads them, started anew when they move."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass

import structlog

from babbler.core.addressing import node_address
from babbler.core.backoff import Backoff
from babbler.core.config import Config
from babbler.daemon.children import keep_running
from babbler.daemon.ipv4 import Ipv4
from babbler.daemon.spawn import nobody_can_run, spawn
from babbler.daemon.wakeup import Signal, rerun_on

log = structlog.get_logger("babbler.bench")

FIRST_PAUSE = 1.0  # seconds before a restart, doubling to MAX_PAUSE while it keeps exiting
MAX_PAUSE = 60.0
STEADY = 60.0  # a responder that ran this long before exiting restarts after FIRST_PAUSE
# The responder's program, run as `python -m` (its own process, no daemon module in it).
PROGRAM = "babbler.bench.responder"


def wanted(config: Config) -> bool:
    """Whether babblerd runs the responder while the mesh runs."""
    return config.bench == "on" and bool(config.bench_port)


def command(
    address: str, port: int, address_v4: str | None = None, ipv4_prefix: str | None = None
) -> list[str]:
    program = [sys.executable, "-m", PROGRAM]
    ipv4 = ["--address-v4", address_v4, "--ipv4-prefix", str(ipv4_prefix)] if address_v4 else []
    return [*program, "--address", address, *ipv4, "--port", str(port)]


async def run_responder(
    address: str,
    port: int,
    address_v4: str | None = None,
    ipv4_prefix: str | None = None,
    tied: bool = True,
) -> None:
    """Keep the responder running until cancelled; then stop it."""
    if os.getuid() == 0 and not nobody_can_run():
        log.warning(
            "bench responder runs as root without any capability: user nobody cannot run "
            "this Python (install babbler where every user can read it to run it as nobody)",
            python=sys.executable,
        )
    log.info("bench responder", address=address, port=port)
    backoff = Backoff(FIRST_PAUSE, MAX_PAUSE, stable=STEADY)  # extra: never the daemon's end
    await keep_running(
        lambda: spawn(command(address, port, address_v4, ipv4_prefix), True, tied),
        "bench responder",
        backoff,
    )


@dataclass(frozen=True)
class Place:
    """Where the responder runs, read at each start (a port)."""

    config: Callable[[], Config]
    node_id: Callable[[], int]
    ipv4: Callable[[], Ipv4]  # its node address and prefix, if IPv4 is on
    moved: Signal  # the node addresses moved: start it anew there


async def while_mesh_runs(place: Place) -> None:
    """The responder on the node addresses until cancelled (the mesh stopped), moved when
    either moves; nothing when the settings do not want it."""
    if wanted(place.config()):
        await rerun_on(place.moved, lambda: on_node_addresses(place))


async def on_node_addresses(place: Place) -> None:
    config, ipv4 = place.config(), place.ipv4()
    address = str(node_address(place.node_id()))
    address_v4 = None if ipv4.node_address is None else str(ipv4.node_address)
    prefix = None if ipv4.prefix is None else str(ipv4.prefix)
    tied = config.platform.children_die_with_babblerd
    await run_responder(address, config.bench_port, address_v4, prefix, tied)
