"""RDMA over Thunderbolt readiness, as babblerd reads it on macOS (`status.rdma`, node info
`rdma`; judged by core/rdma.py). On Linux it is never read and stays None.

Read at start, when the links change (a cable in or out, a port up or down: not babblerd's
own address changes) and every REREAD seconds, never at every pass: `system_profiler` alone
takes about a second on a Mac. Every command is a read; one that fails or is missing
(`rdma_ctl` and `ibv_devices` before macOS 26.2) counts as saying nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog
import trio

from babbler.core import rdma
from babbler.core.errors import KernelError
from babbler.core.links import Link
from babbler.daemon.links.darwin import run_command
from babbler.daemon.wakeup import Signal

log = structlog.get_logger("babbler.daemon")

REREAD = 300.0  # s: a Mac updated or RDMA enabled restarts it; this catches the rest
SETTLE = 0.5  # s after a link change: a cable plugged in is several changes in a row
COMMAND_WAIT = 10.0  # s: system_profiler answers in about a second

Runner = Callable[[Sequence[str]], Awaitable[str]]


@dataclass(frozen=True)
class Reads:
    """What the room reads of the daemon (a port)."""

    macos: bool  # the platform babblerd acts as is macOS
    links: Callable[[], Mapping[str, Link]]  # as the reconcile last read them
    links_changed: Signal  # the reconcile's


def _shape(links: Mapping[str, Link]) -> frozenset[tuple[str, bool, bool | None]]:
    """What of the links the readiness depends on: which are there, up, with a far end."""
    return frozenset((link.name, link.up, link.carrier) for link in links.values())


class Readiness:
    def __init__(self, reads: Reads, run: Runner | None = None) -> None:
        self._reads = reads
        self._run = run or (lambda args: run_command(args, COMMAND_WAIT))
        self.value: dict[str, Any] | None = None  # status.rdma
        self.reads = 0  # how many times the commands ran (tests: not at every pass)

    async def _output(self, name: str) -> str | None:
        try:
            return await self._run(rdma.COMMANDS[name])
        except KernelError:
            return None

    async def read(self) -> None:
        """Run the commands and keep what they say; log a change of readiness."""
        value = rdma.read(**{name: await self._output(name) for name in rdma.COMMANDS})
        self.reads += 1
        if value != self.value:
            said = [p.what for p in rdma.problems(value)]
            log.info("rdma over thunderbolt", ready=value["ready"], problems=said)
        self.value = value

    async def follow(self) -> None:
        """Until cancelled: read now, then when the links change and every REREAD."""
        if not self._reads.macos:
            return
        shape = None
        while True:
            event = self._reads.links_changed.event()
            current = _shape(self._reads.links())
            if current != shape:
                shape = current
                await self.read()
            with trio.move_on_after(REREAD) as slow:
                await event.wait()
            if slow.cancelled_caught:
                shape = None  # read again, links or not
            else:
                await trio.sleep(SETTLE)
