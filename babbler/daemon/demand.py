"""Who wants the mesh, and its one owner: wait for demand, run it, linger, stop it.

Demand is the `always` mode or a local subscriber (`monitor` or `watch`); `linger` seconds
after the last one goes the mesh stops (DESIGN.md "Lifecycle"). `run_mesh` is the one loop
that turns the mesh on and off; what runs while it is on (the supervisor, the node info
service, the bench responder, the lonely-links check) is the caller's, started into the
nursery it is given. While it runs, `say_lonely_links` logs a used link with no neighbour.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import structlog
import trio

from babbler.core.config import Config
from babbler.core.lonely import CAUSES, LonelyLinks
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
        await set_active(True)
        async with trio.open_nursery() as nursery:
            await start(nursery)
            await demand.until_released()
            nursery.cancel_scope.cancel()
        await set_active(False)


async def say_lonely_links(used: Callable[[], set[str]], met: Callable[[], set[str]]) -> None:
    """While the mesh runs: a link babeld uses (`used`: up ones), without a neighbour
    (`met`: the links babeld lists one on) for a while is logged once with the likely
    causes (core/lonely.py), and again when one comes."""
    lonely = LonelyLinks()
    while True:
        await trio.sleep(LONELY_CHECK)
        quiet, found = lonely.check(trio.current_time(), used(), met())
        for name in quiet:
            log.warning(f"no neighbour on {name} for {lonely.quiet:g} s", causes=CAUSES)
        for name in found:
            log.info(f"neighbour on {name} at last")
