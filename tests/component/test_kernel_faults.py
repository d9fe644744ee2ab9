"""Only a signal stops babblerd (issue 36): a kernel that fails, answers nonsense or hangs,
whatever asks it (a link event, a cable change, a collision, demand, a reload, the start),
leaves the daemon serving `status` with `kernel_problem` set and systemd's watchdog fed;
once the kernel answers again the problem is null and what the trigger asked for is done.
Written against the `Kernel` protocol (the fault-injecting tests/fakes/kernel.py) and the
public socket."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import tempfile
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from ipaddress import IPv6Address, IPv6Network
from pathlib import Path
from typing import Any

import pytest
import structlog
import trio

from babbler.daemon import serve
from babbler.daemon.lifecycle import Daemon, Tunables
from babbler.daemon.nodeid import NodeId
from tests.component.harness import NODE, Client, Fake, connect, eventually, running, veth
from tests.fakes.kernel import FAULTS, FakeKernel, FaultySettings

# A call counts as hung after 0.5 s; a failed pass is tried again after 0.2 s, then 0.4 s.
TUNABLES = Tunables(kernel_deadline=0.5, kernel_retry=(0.2, 0.4))
# The fake babeld's neighbour announces node aaaabbbbcccc's range from another router id:
# run as that node, this one sees a collision (after the hold, 5 s) and takes a new id.
CLONE = NodeId(0xAAAABBBBCCCC, "flag")
SAYS = {"fail": "Cannot allocate memory", "nonsense": "nonsense", "hang": "no answer in 0.5 s"}
WATCHDOG_USEC = 100_000  # systemd's WatchdogSec: pinged every 0.05 s
# The longest the loop may go without a ping or an answer to `status` (a sysctl that hangs
# on the loop stalls it 1.5 s here; systemd would give up after 0.1 s).
STALL = 1.0


class Watchdog:
    """systemd's side of the watchdog: when each WATCHDOG=1 came."""

    def __init__(self) -> None:
        self.pings: list[float] = []

    def longest_gap(self) -> float:
        return max((b - a for a, b in zip(self.pings, self.pings[1:], strict=False)), default=0)


@asynccontextmanager
async def fed_watchdog(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Watchdog]:
    """babblerd's own watchdog task (daemon/serve.py) pinging a notify socket of ours."""
    base = Path(tempfile.mkdtemp(prefix="bbw", dir="/tmp"))
    receiver = trio.socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    await receiver.bind(str(base / "notify"))
    monkeypatch.setenv("NOTIFY_SOCKET", str(base / "notify"))
    monkeypatch.setenv("WATCHDOG_USEC", str(WATCHDOG_USEC))
    monkeypatch.delenv("WATCHDOG_PID", raising=False)
    dog = Watchdog()

    async def receive() -> None:
        while True:
            if await receiver.recv(64) == b"WATCHDOG=1":
                dog.pings.append(trio.current_time())

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(receive)
            nursery.start_soon(serve._watchdog)
            yield dog
            nursery.cancel_scope.cancel()
    finally:
        receiver.close()
        shutil.rmtree(base, ignore_errors=True)


async def status_of(client: Client) -> dict[str, Any]:
    """`status`, answered within STALL seconds: the loop serves while the kernel fails."""
    with trio.fail_after(STALL):
        lines = await client.request("status")
    assert lines[-1] == "ok", lines
    value: dict[str, Any] = json.loads(lines[0])
    return value


async def until(
    client: Client, check: Callable[[dict[str, Any]], object], what: str, timeout: float = 10.0
) -> None:
    found: list[dict[str, Any]] = []

    async def seen() -> bool:
        found[:] = [await status_of(client)]
        return bool(check(found[0]))

    with trio.move_on_after(timeout):
        while not await seen():
            await trio.sleep(0.02)
        return
    raise AssertionError(f"not within {timeout} s: {what}; status said {found[0]}")


def addressed(link: str) -> Callable[[dict[str, Any]], bool]:
    """The status shows an address of the node's range on `link`."""

    def check(status: dict[str, Any]) -> bool:
        own = IPv6Network(status["range"])
        found = (IPv6Address(a["address"]) for a in status["addresses"] if a["interface"] == link)
        return any(address in own for address in found)

    return check


@dataclass(frozen=True)
class World:
    daemon: Daemon
    fake: Fake
    kernel: FakeKernel
    client: Client


@dataclass(frozen=True)
class Trigger:
    """What makes the daemon reconcile, and what it must have done once the kernel answers."""

    mode: str
    node: NodeId
    fire: Callable[[World], Awaitable[None]]
    done: Callable[[World, dict[str, Any]], bool]
    ready: Callable[[dict[str, Any]], bool] = lambda status: bool(status["addresses"])


async def plug_a_cable(world: World) -> None:
    world.kernel.set_link(veth("v1x3", 3))


async def kill_babeld(world: World) -> None:
    # babeld's links and neighbours go, then come back with the next babeld: cable changes.
    os.kill(world.fake.starts()[-1][0], signal.SIGKILL)


async def collide(world: World) -> None:
    # The colliding route came with babeld; the node moves once it has been held 5 s.
    await until(world.client, lambda s: s["node_id"] != f"{CLONE.value:012x}", "moved", 15.0)


async def subscribe(world: World) -> None:
    watcher = await connect(world.daemon.config.socket_path)
    await watcher.send("watch")


async def reload(world: World) -> None:
    await world.daemon.reload()  # what SIGHUP runs (daemon/serve.py)


async def nothing(world: World) -> None:
    return None  # the fault was there before the daemon started


def renumbered(world: World, status: dict[str, Any]) -> bool:
    node = int(status["node_id"], 16)
    return node != CLONE.value and addressed("v1x2")(status)


def running_babeld(status: dict[str, Any]) -> bool:
    return status["mesh"] == "running" and status["babeld"]["pid"] is not None


def restarted(world: World, status: dict[str, Any]) -> bool:
    starts = world.fake.starts()
    return len(starts) > 1 and status["babeld"]["pid"] == starts[-1][0]


def demanded(world: World, status: dict[str, Any]) -> bool:
    return status["mesh"] == "running" and addressed("v1x2")(status)


def listed(status: dict[str, Any]) -> bool:
    return [i["name"] for i in status["interfaces"]] == ["v1x2"]  # idle: no address yet


def addressed_v1x3(world: World, status: dict[str, Any]) -> bool:
    return addressed("v1x3")(status)


def addressed_v1x2(world: World, status: dict[str, Any]) -> bool:
    return addressed("v1x2")(status)


def unaddressed(world: World, status: dict[str, Any]) -> bool:
    # The harness's configuration file has no `interface`: reloaded, v1x2 is no mesh link.
    return not status["addresses"]


TRIGGERS = {
    "link event": Trigger("always", NODE, plug_a_cable, addressed_v1x3),
    "cable change": Trigger("always", NODE, kill_babeld, restarted, ready=running_babeld),
    "collision": Trigger("always", CLONE, collide, renumbered),
    "demand": Trigger("on-demand", NODE, subscribe, demanded, ready=listed),
    "reload": Trigger("always", NODE, reload, unaddressed),
    "start": Trigger("always", NODE, nothing, addressed_v1x2),
}


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("name", list(TRIGGERS))
async def test_a_failing_kernel_never_stops_or_stalls_the_daemon(
    name: str, fault: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    trigger = TRIGGERS[name]
    kernel = FakeKernel(veth("v1x2", 2))
    if name == "start":
        kernel.inject("read_links", fault, times=None)
    with structlog.testing.capture_logs() as logs:
        async with (
            fed_watchdog(monkeypatch) as watchdog,
            running(kernel, mode=trigger.mode, node=trigger.node, tunables=TUNABLES) as (
                daemon,
                fake,
            ),
        ):
            client = await connect(daemon.config.socket_path)
            world = World(daemon, fake, kernel, client)
            if name != "start":
                await until(client, trigger.ready, "ready")
                kernel.inject("read_links", fault, times=None)  # until healed
                await trigger.fire(world)
            await until(client, lambda s: s["kernel_problem"], "a kernel problem shown")
            problem = (await status_of(client))["kernel_problem"]
            assert problem.startswith("cannot read links: ") and SAYS[fault] in problem
            reads = kernel.reads["read_links"]
            await eventually(  # failing all along: retried, and serving
                lambda: kernel.reads["read_links"] >= reads + 2, what="two more tries"
            )
            assert (await status_of(client))["kernel_problem"] == problem
            kernel.heal()
            await until(
                client,
                lambda s: s["kernel_problem"] is None and trigger.done(world, s),
                f"recovered, and the {name}'s work done",
            )
            assert watchdog.longest_gap() < STALL, watchdog.pings
    if name == "reload":
        return  # a reload sets logging up anew: the capture ends there
    said = [e for e in logs if e["event"].startswith("kernel failed")]
    assert [e["problem"] for e in said] == [problem], "said once"
    assert sum(e["event"] == "kernel answers again" for e in logs) == 1


@pytest.mark.parametrize(("fault", "times"), [("fail", 3), ("nonsense", 2), ("hang", 1)])
async def test_a_kernel_that_fails_a_few_reads_is_tried_again_until_it_answers(
    fault: str, times: int
) -> None:
    """No other event comes: the back-off retries alone bring the plan about."""
    kernel = FakeKernel(veth("v1x2", 2))
    with structlog.testing.capture_logs() as logs:
        async with running(kernel, mode="always", tunables=TUNABLES) as (daemon, _):
            client = await connect(daemon.config.socket_path)
            await until(client, addressed("v1x2"), "addressed")
            reads = kernel.reads["read_links"]
            kernel.inject("read_links", fault, times)
            kernel.set_link(veth("v1x3", 3))
            await until(
                client,
                lambda s: addressed("v1x3")(s) and s["kernel_problem"] is None,
                "v1x3 addressed after the retries",
            )
            assert kernel.reads["read_links"] >= reads + times + 1
    said = [e["problem"] for e in logs if e["event"].startswith("kernel failed")]
    assert len(said) == 1 and SAYS[fault] in said[0], said
    again = [e for e in logs if e["event"] == "kernel answers again"]
    assert [e["failed_passes"] for e in again] == [times]


async def test_routes_that_cannot_be_read_leave_the_links_reconciled() -> None:
    """The clash check's route read fails: the last verdict stands, the addresses still
    follow the links, and the status says which read fails."""
    kernel = FakeKernel(veth("v1x2", 2))
    async with running(kernel, mode="always", tunables=TUNABLES) as (daemon, _):
        client = await connect(daemon.config.socket_path)
        await until(client, addressed("v1x2"), "addressed")
        kernel.inject("read_routes_v4", "fail", times=None)
        kernel.set_link(veth("v1x3", 3))
        await until(client, addressed("v1x3"), "v1x3 addressed all the same")
        problem = (await status_of(client))["kernel_problem"]
        assert problem == "cannot read IPv4 routes: read_routes_v4: Cannot allocate memory"
        kernel.inject("read_routes_v4", "hang", times=None)
        await until(client, lambda s: "no answer" in (s["kernel_problem"] or ""), "hung")
        kernel.heal()
        await until(client, lambda s: s["kernel_problem"] is None, "recovered")


async def test_a_hanging_sysctl_blocks_neither_clients_nor_the_watchdog(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """macOS's sysctl(8) hangs until its timeout ends it: the setting is not made (said
    as the kernel problem), and meanwhile the loop serves and feeds the watchdog."""
    kernel = FakeKernel(veth("v1x2", 2))
    settings = kernel.settings = FaultySettings()
    async with (
        fed_watchdog(monkeypatch) as watchdog,
        running(kernel, mode="always", tunables=TUNABLES) as (daemon, _),
    ):
        client = await connect(daemon.config.socket_path)
        await until(client, addressed("v1x2"), "addressed")
        assert settings.values["net/ipv6/conf/all/forwarding"] == "1"  # the setup is made
        settings.hang(1.5, "net/ipv6/conf/v1x3/optimistic_dad", times=2)
        kernel.set_link(veth("v1x3", 3))
        await until(client, lambda s: s["kernel_problem"], "the sysctl said")
        problem = (await status_of(client))["kernel_problem"]
        assert problem == "cannot set net.ipv6.conf.v1x3.optimistic_dad=1: cannot read"
        await until(client, lambda s: s["kernel_problem"] is None, "set at the retry")
        assert settings.values["net/ipv6/conf/v1x3/optimistic_dad"] == "1"
        assert watchdog.longest_gap() < STALL, watchdog.pings
        assert threading.main_thread().name not in settings.threads
