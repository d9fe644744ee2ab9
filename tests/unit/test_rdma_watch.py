"""babblerd's RDMA readiness room (daemon/rdma.py) with a fake Mac: read at start, again
when a cable comes or goes, not for babblerd's own address changes, and every REREAD; a
command that fails says nothing; on Linux nothing runs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from ipaddress import IPv6Address
from pathlib import Path

import pytest
import trio
import trio.testing

from babbler.core.errors import KernelError
from babbler.core.links import Link
from babbler.core.rdma import COMMANDS
from babbler.daemon import rdma as room
from babbler.daemon.wakeup import Signal

DATA = Path(__file__).parent / "data" / "darwin"
OUTPUTS = {
    "sw_vers": (DATA / "sw_vers-productVersion.txt").read_text(),
    "rdma_ctl": "disabled\n",
    "ibv_devices": (DATA / "ibv_devices.txt").read_text(),
    "networksetup": (DATA / "networksetup-listallhardwareports.txt").read_text(),
    "system_profiler": (DATA / "system_profiler-thunderbolt.json").read_text(),
}


class FakeMac:
    def __init__(self) -> None:
        self.ran: list[str] = []
        self.missing: set[str] = set()

    async def run(self, args: Sequence[str]) -> str:
        self.ran.append(args[0])
        if args[0] in self.missing:
            raise KernelError(f"{args[0]}: No such file or directory", 2)
        return OUTPUTS[args[0]]


def watch(macos: bool = True) -> tuple[room.Readiness, FakeMac, dict[str, Link], Signal]:
    mac, signal = FakeMac(), Signal()
    links = {"en4": Link("en4", 9, up=True, carrier=True, link_local=True)}
    reads = room.Reads(macos=macos, links=lambda: links, links_changed=signal)
    return room.Readiness(reads, mac.run), mac, links, signal


@pytest.mark.timeout(3 * room.REREAD)  # the clock's, which jumps
async def test_read_at_start_on_a_cable_change_and_slowly_never_for_addresses(
    autojump_clock: trio.testing.MockClock,
) -> None:
    readiness, mac, links, signal = watch()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(readiness.follow)
        await trio.sleep(1)
        assert readiness.reads == 1 and len(mac.ran) == len(COMMANDS)
        value = readiness.value
        assert value is not None and value["rdma_ctl"] == "disabled" and not value["ready"]
        assert [c["interface"] for c in value["cables"]] == ["en4"]  # each output in its place
        for _ in range(5):  # babblerd's own addresses: links_changed, the same cables
            links["en4"] = replace(links["en4"], addresses=frozenset({IPv6Address("fde0::1")}))
            signal.notify()
            await trio.sleep(1)
        assert readiness.reads == 1
        links["en4"] = replace(links["en4"], carrier=False)  # the cable pulled
        signal.notify()
        await trio.sleep(1)
        assert readiness.reads == 2
        await trio.sleep(room.REREAD)
        assert readiness.reads == 3
        nursery.cancel_scope.cancel()


@pytest.mark.timeout(3 * room.REREAD)
async def test_commands_that_fail_say_nothing_and_linux_runs_none(
    autojump_clock: trio.testing.MockClock,
) -> None:
    readiness, mac, _, _ = watch()
    mac.missing = {"rdma_ctl", "ibv_devices"}  # macOS before 26.2
    await readiness.read()
    value = readiness.value
    assert value is not None and value["rdma_ctl"] is None and value["devices"] == []
    linux, ran, _, _ = watch(macos=False)
    with trio.move_on_after(room.REREAD * 2):
        await linux.follow()
    assert linux.value is None and ran.ran == []
