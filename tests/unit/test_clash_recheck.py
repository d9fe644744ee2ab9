"""The IPv4 clash check's own timer (ipv4_service.follow_clashes): a reconcile at least every
CLASH_RECHECK seconds, none while reconciles check often enough by themselves (on macOS one
runs every 2 s: an extra one every 5 s was a pass, an `ifconfig` and a `netstat`, for
nothing)."""

from __future__ import annotations

import itertools
from ipaddress import IPv4Network
from pathlib import Path

import trio
import trio.testing

from babbler.daemon.ipv4 import Ipv4
from babbler.daemon.ipv4_service import CLASH_RECHECK, Ipv4Service
from tests.fakes.kernel import FakeKernel


def service(tmp_path: Path) -> Ipv4Service:
    state = Ipv4(IPv4Network("10.77.0.0/16"), tmp_path, node_id=1)
    return Ipv4Service(state, FakeKernel(), restart=lambda why: None)


async def test_a_quiet_host_is_checked_every_recheck(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    ipv4 = service(tmp_path)
    refreshes: list[float] = []

    async def refresh() -> None:
        refreshes.append(trio.current_time())
        await ipv4.check_clash()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ipv4.follow_clashes, refresh)
        await trio.sleep(CLASH_RECHECK * 4 + 1)
        nursery.cancel_scope.cancel()
    assert len(refreshes) in (4, 5)  # the first at once: nothing had checked yet
    gaps = [b - a for a, b in itertools.pairwise(refreshes)]
    assert all(gap == CLASH_RECHECK for gap in gaps), gaps


async def test_no_extra_reconcile_while_reconciles_check_by_themselves(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    ipv4 = service(tmp_path)
    extra = 0

    async def refresh() -> None:
        nonlocal extra
        extra += 1
        await ipv4.check_clash()

    async def passes() -> None:  # macOS's re-read: a pass every 2 s, each checking
        while True:
            await ipv4.check_clash()
            await trio.sleep(2.0)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(passes)
        await trio.sleep(0.5)
        nursery.start_soon(ipv4.follow_clashes, refresh)
        await trio.sleep(CLASH_RECHECK * 6)
        nursery.cancel_scope.cancel()
    assert extra == 0
