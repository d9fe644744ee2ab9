"""trio wake-ups: `Signal`, a broadcast a waiter cannot miss; `wait_any`; `run_on`;
`rerun_on`."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Iterable

import trio


class Signal:
    """A broadcast wake-up: `notify()` wakes everyone waiting on the event they took.

    Take the event *before* reading the state it guards, then wait on it, so that a change
    between the read and the wait is never missed:
        event = signal.event(); look at state; await event.wait()
    """

    def __init__(self) -> None:
        self._event = trio.Event()

    def event(self) -> trio.Event:
        return self._event

    def notify(self) -> None:
        self._event.set()
        self._event = trio.Event()


async def wait_any(events: Iterable[trio.Event]) -> None:
    """Until one of `events` is set."""
    async with trio.open_nursery() as nursery:

        async def wait(event: trio.Event) -> None:
            await event.wait()
            nursery.cancel_scope.cancel()

        for event in events:
            nursery.start_soon(wait, event)


async def run_on(
    signal: Signal,
    run: Callable[[], Awaitable[object]],
    until: Callable[[], float] = lambda: math.inf,
) -> None:
    """Until cancelled: `run()` each time `signal` notifies, or when the trio time `until()`
    (asked before each wait) comes first. The event is taken before each run, so a notify
    while `run` runs (what it read may be old already) brings one more run after it; taken
    after, that notify was lost, and nothing might come again to make up for it."""
    event = signal.event()
    while True:
        with trio.move_on_at(until()):
            await event.wait()
        event = signal.event()
        await run()


async def rerun_on(signal: Signal, run: Callable[[], Awaitable[object]]) -> None:
    """Run `run()` until cancelled; each time `signal` notifies, cancel it and run it anew
    (a service on the node address, when the node id changes)."""
    while True:
        event = signal.event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            await event.wait()
            nursery.cancel_scope.cancel()
