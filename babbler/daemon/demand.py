"""Who wants the mesh, and its one owner: wait for demand, run it, linger, stop it.

Demand is the `always` mode or a local subscriber (`monitor` or `watch`); `linger` seconds
after the last one goes the mesh stops (DESIGN.md "Lifecycle"). `run_mesh` is the one loop
that turns the mesh on and off; what runs while it is on (the supervisor, the node info
service, the bench responder, the lonely-links check) is the caller's, started into the
nursery it is given. While it runs, `say_lonely_links` logs a used link with no neighbour.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass

import structlog
import trio

from babbler.core.config import Config
from babbler.core.links import Link
from babbler.core.lonely import CAUSES, LonelyLinks
from babbler.core.table import MeshTable
from babbler.daemon.wakeup import Signal

log = structlog.get_logger("babbler.daemon")

# How often the mesh links are looked at for a missing neighbour (only while the mesh runs).
LONELY_CHECK = 5.0


class Demand:
    """Whether the mesh is wanted now; `changed` is notified when that may have changed (a
    subscriber came or went, the settings were reloaded)."""

    def __init__(self, config: Callable[[], Config], subscribers: Callable[[], int]) -> None:
        self._config = config
        self._subscribers = subscribers
        self.changed = Signal()

    def wanted(self) -> bool:
        return self._config().mode == "always" or self._subscribers() > 0

    def say(self, active: bool) -> None:
        log.info(
            "mesh " + ("demanded" if active else "released"),
            mode=self._config().mode,
            subscribers=self._subscribers(),
        )

    async def until(self, condition: Callable[[], bool]) -> None:
        while not condition():
            await self.changed.event().wait()

    async def until_released(self) -> None:
        """Return once nobody has wanted the mesh for `linger` seconds."""
        while True:
            await self.until(lambda: not self.wanted())
            with trio.move_on_after(self._config().linger):
                await self.until(self.wanted)
                continue
            return


async def run_mesh(
    demand: Demand,
    set_active: Callable[[bool], Awaitable[None]],
    start: Callable[[trio.Nursery], Awaitable[None]],
) -> None:
    """The one owner of the mesh: wait for demand, `set_active(True)`, `start` what runs
    with the mesh into a nursery, linger, cancel it, `set_active(False)`; forever."""
    while True:
        await demand.until(demand.wanted)
        demand.say(True)
        await set_active(True)
        async with trio.open_nursery() as nursery:
            await start(nursery)
            await demand.until_released()
            nursery.cancel_scope.cancel()
        demand.say(False)
        await set_active(False)


@dataclass(frozen=True)
class Cables:
    """What the lonely-links check reads (a port)."""

    told: Callable[[], Iterable[str]]  # the links babeld was told to use (mesh.py)
    links: Callable[[], Mapping[str, Link]]  # as last read
    table: Callable[[], MeshTable]  # babeld's: its neighbours


def used(cables: Cables) -> set[str]:
    """The links babeld uses that are up."""
    links = cables.links()
    return {name for name in cables.told() if (link := links.get(name)) and link.up}


def met(cables: Cables) -> set[str]:
    """The links babeld lists a neighbour on."""
    return {e.field("if") or "" for e in cables.table().entries("neighbour")} - {""}


async def say_lonely_links(cables: Cables) -> None:
    """While the mesh runs: a link babeld uses (up ones), without a neighbour for a while is
    logged once with the likely causes (core/lonely.py), and again when one comes."""
    lonely = LonelyLinks()
    while True:
        await trio.sleep(LONELY_CHECK)
        quiet, found = lonely.check(trio.current_time(), used(cables), met(cables))
        for name in quiet:
            log.warning(f"no neighbour on {name} for {lonely.quiet:g} s", causes=CAUSES)
        for name in found:
            log.info(f"neighbour on {name} at last")
