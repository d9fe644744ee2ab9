"""The IPv4 clash check's own timer (ipv4_service.follow_clashes): the routes read at least
every CLASH_RECHECK seconds, none while reconciles check often enough by themselves (on macOS
one runs every 2 s: an extra one every 5 s was a pass, an `ifconfig` and a `netstat`, for
nothing); a reconcile only when the verdict changes or the routes cannot be read (a whole
pass every 5 s was a third of a quiet node's CPU)."""

from __future__ import annotations

import itertools
from ipaddress import IPv4Network
from pathlib import Path

import trio
import trio.testing

from babbler.core.ipv4 import HostRoute
from babbler.daemon.ipv4 import Ipv4
from babbler.daemon.ipv4_service import CLASH_RECHECK, Ipv4Service
from tests.fakes.kernel import FakeKernel


def service(tmp_path: Path, kernel: FakeKernel | None = None) -> Ipv4Service:
    state = Ipv4(IPv4Network("10.77.0.0/16"), tmp_path, node_id=1)
    return Ipv4Service(state, kernel or FakeKernel(), restart=lambda why: None)


async def test_a_quiet_host_has_its_routes_read_every_recheck_and_no_reconcile(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    kernel = FakeKernel()
    ipv4 = service(tmp_path, kernel)
    reads: list[float] = []
    refreshes = 0

    async def read_routes_v4() -> list[HostRoute]:
        reads.append(trio.current_time())
        return list(kernel.routes_v4)

    async def refresh() -> None:
        nonlocal refreshes
        refreshes += 1
        await ipv4.check_clash()

    kernel.read_routes_v4 = read_routes_v4  # type: ignore[method-assign]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(ipv4.follow_clashes, refresh)
        await trio.sleep(CLASH_RECHECK * 4 + 1)
        nursery.cancel_scope.cancel()
    assert len(reads) in (4, 5)  # the first at once: nothing had checked yet
    gaps = [b - a for a, b in itertools.pairwise(reads)]
    assert all(gap == CLASH_RECHECK for gap in gaps), gaps
    assert refreshes == 0


async def test_a_clash_that_starts_or_ends_or_a_failed_read_brings_a_reconcile(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    kernel = FakeKernel()
    ipv4 = service(tmp_path, kernel)
    refreshes: list[str | None] = []

    async def refresh() -> None:
        await ipv4.check_clash()
        refreshes.append(ipv4.state.problem)

    vpn = HostRoute(IPv4Network("10.77.3.0/24"), "route 10.77.3.0/24 table main")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(ipv4.follow_clashes, refresh)
        await trio.sleep(CLASH_RECHECK * 2 + 1)
        assert refreshes == []
        kernel.routes_v4 = [vpn]  # a VPN comes up over the prefix
        await trio.sleep(CLASH_RECHECK)
        assert refreshes == ["route 10.77.3.0/24 table main overlaps 10.77.0.0/16"]
        await trio.sleep(CLASH_RECHECK * 2)
        assert len(refreshes) == 1  # still clashing: nothing new
        kernel.routes_v4 = []
        await trio.sleep(CLASH_RECHECK)
        assert refreshes[1:] == [None]
        kernel.inject("read_routes_v4", "fail", times=1)
        await trio.sleep(CLASH_RECHECK)
        assert len(refreshes) == 3  # the pass reports it (and reads again)
        nursery.cancel_scope.cancel()


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
