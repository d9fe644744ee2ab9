"""daemon/wakeup.py: `run_on` runs again for a notify that came while it ran."""

from __future__ import annotations

import trio
import trio.testing
from trio.testing import MockClock

from babbler.daemon.wakeup import Signal, run_on


async def test_a_notify_during_a_run_brings_another_run(autojump_clock: MockClock) -> None:
    """The lost wake-up behind a cable without its /31: babeld's neighbour came while the
    pass that answered the last one was past its read of the table, and no pass followed."""
    signal = Signal()
    runs: list[float] = []
    first_run = trio.Event()
    go_on = trio.Event()

    async def run() -> None:
        runs.append(trio.current_time())
        if len(runs) == 1:
            first_run.set()
            await go_on.wait()  # a pass still applying what it read

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_on, signal, run)
        await trio.testing.wait_all_tasks_blocked()
        signal.notify()
        await first_run.wait()
        signal.notify()  # the neighbour came meanwhile
        go_on.set()
        with trio.move_on_after(5):
            while len(runs) < 2:
                await trio.sleep(0.01)
        nursery.cancel_scope.cancel()
    assert len(runs) == 2


async def test_it_runs_at_until_without_a_notify_and_not_before(
    autojump_clock: MockClock,
) -> None:
    signal = Signal()
    runs: list[float] = []

    async def run() -> None:
        runs.append(trio.current_time())

    start = trio.current_time()
    deadlines = iter([start + 2.0, start + 1e9])
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_on, signal, run, lambda: next(deadlines))
        await trio.sleep(1.0)
        assert runs == []
        await trio.sleep(1.5)
        nursery.cancel_scope.cancel()
    assert len(runs) == 1 and runs[0] >= start + 2.0
