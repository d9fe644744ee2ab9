"""This node's link counters (bytes and packets in and out, since each link was made), read
when someone asks: `status`, the `counters` request, another node's `counters` ask
(docs/protocol.md). Where from is the platform's (core/platform.py `counters_command`):
sysfs on Linux, `netstat -ibn` on macOS (read by core/darwin_output.py).

A reading carries this node's monotonic clock at the moment it was read (`at`): a reader
computes rates from two readings of one node, so the reading says when, never a rate.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field

import structlog
import trio

from babbler.core.darwin_output import link_counters
from babbler.core.errors import KernelError
from babbler.core.platform import Platform
from babbler.daemon.links.darwin import run_command
from babbler.host import sysfs

log = structlog.get_logger("babbler.daemon")

# A reading younger than this is given again instead of read anew: on macOS a read is a
# process (`netstat -ibn`, a few ms), and status, the `counters` request and other nodes'
# asks may come together; its `at` says when it was read, so a reader's rates stay true.
REUSE = 0.25
# A read that takes longer (a hung netstat) gives no counters this time: `status` is not
# held up for them. Seconds.
READ_DEADLINE = 2.0

Runner = Callable[[Sequence[str]], Awaitable[str]]


@dataclass(frozen=True)
class Reading:
    """Each link's counters at one moment (None for a link whose counters could not be
    read), and this node's monotonic clock then (`time.monotonic()`, seconds)."""

    at: float
    links: dict[str, dict[str, int] | None] = field(default_factory=dict)

    def interfaces(self) -> list[dict[str, int | str]]:
        """The links read, as the `counters` request and answer list them (name first)."""
        return [{"name": name, **found} for name, found in self.links.items() if found]


class CountersReader:
    """The reads, and the last reading (`latest`)."""

    def __init__(
        self,
        platform: Platform,
        run: Runner | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._command = platform.counters_command
        self._run = run or run_command
        self._clock = clock  # the `at` of a reading: this node's monotonic clock
        self.latest: Reading | None = None
        self._read_at = -float("inf")  # trio time of `latest`
        self._failed = False  # the last command failed: said once until it works again
        self._lock = trio.Lock()  # reads that come together share one

    async def read(self, names: Iterable[str]) -> Reading:
        """The counters of these links now (or REUSE ago). Never raises: what cannot be
        read is None."""
        wanted = list(names)
        async with self._lock:
            now, latest = trio.current_time(), self.latest
            if latest is not None and now - self._read_at < REUSE and list(latest.links) == wanted:
                return latest
            if self._command is None:
                links = {name: sysfs.read_counters(name) for name in wanted}
            else:
                found = await self._read_all()
                links = {name: found.get(name) for name in wanted}
            self.latest = latest = Reading(self._clock(), links)
            self._read_at = trio.current_time()
            return latest

    async def _read_all(self) -> dict[str, dict[str, int]]:
        """The platform's command, parsed; {} when it fails or hangs (said once)."""
        assert self._command is not None
        try:
            with trio.fail_after(READ_DEADLINE):
                text = await self._run(self._command)
        except (KernelError, trio.TooSlowError) as error:
            if not self._failed:
                log.warning("cannot read link counters", error=str(error) or "no answer")
            self._failed = True
            return {}
        self._failed = False
        return link_counters(text)
