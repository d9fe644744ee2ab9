"""The daemon against a fake babeld: supervision, the client protocol, on-demand lifecycle."""

from __future__ import annotations

import itertools
import json
import os
import signal
from collections.abc import MutableMapping
from dataclasses import replace
from functools import partial
from ipaddress import IPv4Network, IPv6Address, ip_address
from pathlib import Path
from typing import Any

import pytest
import structlog
import trio

from babbler.core.addressing import node_range
from babbler.core.config import DEFAULT_HELLO_INTERVAL
from babbler.core.links import Link
from babbler.core.platform import LINUX, MACOS, Platform
from babbler.daemon.babeld.session import Deadlines
from babbler.daemon.lifecycle import Tunables
from babbler.daemon.mesh import Fact, MeshTunables
from tests.component.harness import NODE, Client, alive, connect, eventually, running, veth
from tests.fakes.kernel import FakeKernel

MINE = node_range(NODE.value)  # links are numbered at random inside it (core/addrplan.py)


def ours(addresses: set[str]) -> set[str]:
    """The addresses of this node's range among `addresses` (a link's, as the kernel holds)."""
    return {a for a in addresses if ip_address(a) in MINE}


V1X3_ADDED = (
    f"interface v1x3 hello-interval {DEFAULT_HELLO_INTERVAL:g} rxcost 96 enable-timestamps true"
    " v4-via-v6 true"
)


async def test_always_mode_runs_babeld_and_serves_its_table() -> None:
    kernel = FakeKernel(veth("v1x2", 2))
    async with running(kernel, mode="always") as (daemon, fake):
        await eventually(lambda: daemon.mesh.state == "running", what="mesh running")
        client = await connect(daemon.config.socket_path)
        status = json.loads((await client.request("status"))[0])
        assert status["mesh"] == "running"
        assert status["node_id"] == "1a2b3c4d5e6f"
        [address] = status["addresses"]
        assert address["interface"] == "v1x2" and ip_address(address["address"]) in MINE
        assert status["interfaces"] == [
            {
                "name": "v1x2",
                "kind": "other",
                "up": True,
                "babel": True,
                "speed_mbps": None,
                "cost": 96,
                "brought_up": False,
                "mtu": None,
                "max_mtu": None,
                "counters": None,  # a fake link: sysfs has none of it
            }
        ]
        assert status["counters_at"] is not None  # read for this request
        assert status["routes"][0]["prefix"] == "fde0:20c6:1fa7:ffff:aaaa:bbbb:cccc:1/128"
        assert status["neighbours"][0]["reach"] == "ffff"
        assert status["babeld"]["pid"] == fake.starts()[0][0]
        dump = await client.request("dump")
        assert dump[0] == "add interface v1x2 up true ipv6 fe80::1"
        assert dump[-1] == "ok" and len(dump) == 5
        assert ours(kernel.addresses("v1x2")) == {address["address"]}


async def test_header_is_shaped_like_babelds() -> None:
    async with running(FakeKernel(veth("v1x2", 2))) as (daemon, _):
        client = await connect(daemon.config.socket_path, read_header=False)
        header = [await client.readline() or "" for _ in range(5)]
        assert header[0] == "BABEL 1.0"
        assert header[1].startswith("version babblerd-")
        assert header[2].startswith("host ")
        assert header[3].startswith("my-id ")
        assert header[4] == "ok"


async def test_interfaces_follow_links_and_refusals_are_survived() -> None:
    kernel = FakeKernel(veth("v1x2", 2))
    async with running(kernel, mode="always") as (daemon, fake):
        await eventually(lambda: daemon.mesh.state == "running")
        kernel.set_link(veth("v1x3", 3))
        await eventually(lambda: V1X3_ADDED in fake.requests())
        kernel.remove_link("v1x3")
        await eventually(lambda: "flush interface v1x3" in fake.requests())
        assert set(daemon.mesh.told) == {"v1x2"}


@pytest.mark.parametrize("refusal", ["refuse", "refuse-bad"])
async def test_refused_interface_is_reported_not_fatal(refusal: str) -> None:
    kernel = FakeKernel(veth("v1x2", 2), veth("v1x3", 3))
    async with running(kernel, fake_mode=refusal, mode="always") as (daemon, fake):
        await eventually(lambda: V1X3_ADDED in fake.requests())
        status = daemon.status()
        assert status["mesh"] == "running"
        assert {i["name"]: i["babel"] for i in status["interfaces"]} == {
            "v1x2": True,
            "v1x3": False,
        }


async def test_babeld_that_exits_at_once_is_retried_with_backoff_and_reported() -> None:
    async with running(FakeKernel(veth("v1x2", 2)), fake_mode="exit", mode="always") as (d, fake):
        await eventually(lambda: len(fake.starts()) >= 4, what="four attempts")
        client = await connect(d.config.socket_path)
        status = json.loads((await client.request("status"))[0])
        assert status["mesh"] in ("restarting", "starting")
        assert status["babeld"]["restarts"] >= 3
        assert "unknown option -Z" in status["babeld"]["last_error"]
        times = [t for _, t in fake.starts()]
        gaps = [b - a for a, b in itertools.pairwise(times)]
        assert gaps[2] > gaps[0]  # 0.1, 0.2, 0.4 s... plus start-up time


# Reconciles let pass before a test looks at what must not have changed: a reconcile
# starting means the one before it ended (they run one at a time), and a pass reads the
# links at most twice, so three starts hold at least one whole pass after the change.
RECONCILES = 3


async def reconciles(kernel: FakeKernel, count: int = RECONCILES) -> None:
    """Until `count` reconciles have begun since the call, one after another: each is woken
    by a kernel event (as a link change would) and begins with a read of the links."""

    def read_since(before: int) -> bool:
        kernel.notify()  # as a link event would; polled again until a pass reads
        return kernel.reads["read_links"] > before

    for _ in range(count):
        await eventually(partial(read_since, kernel.reads["read_links"]), what="a reconcile")


def mesh_numbers(**numbers: Any) -> Tunables:
    return Tunables(mesh=MeshTunables(**numbers))


async def test_babeld_that_never_greets_is_killed_and_restarted() -> None:
    tunables = mesh_numbers(deadlines=Deadlines(greeting=0.5))
    kernel = FakeKernel(veth("v1x2", 2))
    async with running(kernel, "silent", tunables=tunables, mode="always") as (d, fake):
        await eventually(lambda: len(fake.starts()) >= 2, what="a second attempt")
        assert "did not greet within 0.5 s" in (d.mesh.last_error or "")
        first_pid = fake.starts()[0][0]
        await eventually(lambda: not alive(first_pid), what="the silent babeld gone")


async def my_id(client: Client) -> str:
    """The router id a connection's header named (read by `connect(..., False)`)."""
    header = await client.until_status()
    return next(line.split()[1] for line in header if line.startswith("my-id "))


async def test_babeld_killed_flushes_then_ends_each_monitor_which_reconnects_to_the_new_id() -> (
    None
):
    async with running(FakeKernel(veth("v1x2", 2)), mode="always") as (daemon, fake):
        await eventually(lambda: daemon.mesh.state == "running")
        watcher = await connect(daemon.config.socket_path)
        await watcher.send("watch")
        assert (await watcher.readline() or "").startswith("{"), "the watch snapshot"
        clients = [await connect(daemon.config.socket_path, False) for _ in range(20)]
        old = {await my_id(client) for client in clients}
        assert old == {daemon.mesh.my_id}, "the header names the babeld that runs"
        for client in clients:
            snapshot = await client.request("monitor")
            assert snapshot[-1] == "ok" and len(snapshot) == 5
        os.kill(fake.starts()[0][0], signal.SIGKILL)
        for client in clients:
            # Every old entry is flushed, then the connection ends, as babeld's own would:
            # the header's my-id names a babeld that no longer runs.
            flushed = [await client.readline() for _ in range(4)]
            assert all(line and line.startswith("flush ") for line in flushed), flushed
            assert await client.readline() is None, "still connected under the old my-id"
        await eventually(lambda: daemon.mesh.state == "running")
        again = await connect(daemon.config.socket_path, False)
        new = await my_id(again)
        assert new == daemon.mesh.my_id and new not in old
        snapshot = await again.request("monitor")
        assert snapshot[-1] == "ok" and len(snapshot) == 5
        assert daemon.mesh.restarts == 1
        await watcher.send("help")  # a `watch` client stays connected: its events go on
        while (line := await watcher.readline()) != "ok":
            assert line is not None, "the watch client was disconnected"


async def test_before_an_early_babeld_is_adopted_the_header_names_it() -> None:
    # On demand: the early babeld is adopted (or not) only when a subscriber starts the mesh.
    async with running(FakeKernel(veth("v1x2", 2)), early_on="v1x2") as (daemon, fake):
        control = daemon.config.private_dir / "babeld.sock"
        await eventually(control.exists, what="the early babeld serving")
        babeld = await connect(control, False)
        early_id = await my_id(babeld)  # as the early babeld itself greets
        await babeld.aclose()
        client = await connect(daemon.config.socket_path, False)
        assert await my_id(client) == early_id
        assert daemon.mesh.session is None and fake.early_pid is not None
        snapshot = await client.request("monitor")  # starts the mesh: the early one adopted
        assert snapshot[-1] == "ok"
        await eventually(lambda: daemon.mesh.state == "running")
        assert daemon.mesh.my_id == early_id and len(fake.starts()) == 1
        assert (await client.request("help"))[-1] == "ok", "the same babeld: still connected"


async def test_repeats_are_dropped_at_the_door_and_real_changes_reach_both() -> None:
    kernel = FakeKernel(veth("v1x2", 2))
    async with running(kernel, chatter="0.01,5", mode="always") as (daemon, _):
        await eventually(lambda: daemon.mesh.state == "running")
        monitor = await connect(daemon.config.socket_path)
        watch = await connect(daemon.config.socket_path)
        await monitor.request("monitor")
        await watch.send("watch")
        snapshot = json.loads(await watch.readline() or "")
        assert snapshot["type"] == "snapshot" and snapshot["status"]["mesh"] == "running"
        # babeld repeats identical lines (5 every 10 ms here): a hundred more are dropped...
        dropped = daemon.view.counters()["babeld_repeats"]
        await eventually(
            lambda: daemon.view.counters()["babeld_repeats"] >= dropped + 100,
            what="a hundred more repeats from babeld",
        )
        # ...and the next thing either stream sees is the next real change.
        kernel.set_link(veth("v1x3", 3))
        event = json.loads(await watch.readline() or "")
        assert event["type"] in ("addresses", "interfaces", "interface")
        line = await monitor.readline()
        assert line is not None and line.startswith("add interface v1x3")
        # `stats` counts what came in, what was dropped, and what went out to clients.
        other = await connect(daemon.config.socket_path)
        stats = json.loads((await other.request("stats"))[0])
        assert stats["babeld_repeats"] >= dropped + 100  # the hundred waited for, at least
        assert stats["babeld_lines_in"] > stats["babeld_repeats"]
        assert 2 <= stats["items_out"] < 50  # the few real changes, to two clients


async def test_unwatched_neighbour_changes_wait_but_status_and_dump_show_the_latest() -> None:
    """With nobody watching, babeld's rtt changes do not wake the daemon (they wait in the
    reader), yet `status` and `dump` show the latest rtt and a `monitor` gets every one."""
    kernel = FakeKernel(veth("v1x2", 2))
    streamed = mesh_numbers(dump_interval=0.1)  # babeld monitored: dumps do not pay
    async with running(
        kernel, chatter="0.02,1", real_changes=True, mode="always", tunables=streamed
    ) as (
        daemon,
        fake,
    ):
        await eventually(lambda: daemon.mesh.state == "running")
        client = await connect(daemon.config.socket_path)

        async def stats() -> dict[str, int]:
            return dict(json.loads((await client.request("stats"))[0]))

        await eventually(lambda: daemon.mesh.line_counts.held >= 10, what="changes held")
        babeld = fake.starts()[0][0]
        os.kill(babeld, signal.SIGSTOP)  # its last line is read and held, not applied
        try:
            last = int((fake.log.parent / "stamps").read_text().split()[-2])

            async def status_rtt() -> float:
                return float(
                    json.loads((await client.request("status"))[0])["neighbours"][0]["rtt"]
                )

            with trio.fail_after(10):
                while await status_rtt() != last / 1000:
                    last = int((fake.log.parent / "stamps").read_text().split()[-2])
            dump = await client.request("dump")
            assert any(f" rtt {last / 1000:.3f} " in line for line in dump)
        finally:
            os.kill(babeld, signal.SIGCONT)
        assert (await stats())["babeld_held"] >= 10

        monitor = await connect(daemon.config.socket_path)
        await monitor.request("monitor")
        await monitor.readline()
        held = (await stats())["babeld_held"]
        rtts = []
        for _ in range(5):  # live, one after another
            line = await monitor.readline()
            assert line is not None and line.startswith("change neighbour ")
            rtts.append(round(float(line.split(" rtt ")[1].split()[0]) * 1000))
        assert rtts == list(range(rtts[0], rtts[0] + 5))
        assert (await stats())["babeld_held"] == held, "held while someone watched"
        await monitor.aclose()
        await eventually(lambda: daemon.mesh.line_counts.held > held, what="held again")


async def test_reads_publish_nothing_and_settle_publishes_what_was_held() -> None:
    """The view's `facts`, `status` and `dump_lines` only read: the neighbour changes held
    while nobody watches are applied and reported by `settle`, which a request calls before
    reading."""
    kernel = FakeKernel(veth("v1x2", 2))
    streamed = mesh_numbers(dump_interval=0.1)  # babeld monitored: dumps do not pay
    async with running(
        kernel, chatter="0.02,1", real_changes=True, mode="always", tunables=streamed
    ) as (
        daemon,
        _,
    ):
        await eventually(lambda: daemon.mesh.line_counts.held >= 3, what="changes held")
        reported: list[object] = []
        report = daemon.mesh.host.report

        def counted(fact: Fact) -> None:
            reported.append(fact)
            report(fact)

        daemon.mesh.host.report = counted
        held = daemon.mesh.line_counts.held
        await eventually(lambda: daemon.mesh.line_counts.held > held, what="one more held")
        count = len(reported)
        daemon.view.facts()
        daemon.view.status()
        daemon.view.dump_lines()
        assert len(reported) == count, "a read reported a fact"
        daemon.view.settle()
        assert len(reported) > count, "settle reported nothing that was held"


async def test_slow_client_is_cut_off_and_others_keep_receiving() -> None:
    kernel = FakeKernel(veth("v1x2", 2))
    async with running(kernel, "normal", "0.01,100", True, mode="always") as (d, _):
        await eventually(lambda: d.mesh.state == "running")
        slow = await connect(d.config.socket_path)
        good = await connect(d.config.socket_path)
        await slow.request("monitor")
        await good.request("monitor")
        received = 0

        async def keep_reading() -> None:
            nonlocal received
            while (line := await good.readline()) is not None:
                assert line.startswith("change "), line
                received += 1

        async with trio.open_nursery() as nursery:
            nursery.start_soon(keep_reading)
            await eventually(lambda: len(d.hub.clients) == 1, what="the slow client dropped")
            after_drop = received
            await eventually(lambda: received > after_drop + 1000, what="good client served")
            nursery.cancel_scope.cancel()
        # The slow client gets whole lines only, perhaps the notice, then the end.
        with trio.fail_after(10):
            while (line := await slow.readline()) is not None:
                whole = line.startswith("change neighbour ") and line.endswith(" cost 96")
                assert whole or line == "no too slow", line


async def test_garbage_and_overlong_lines_get_bad_and_never_reach_babeld() -> None:
    async with running(FakeKernel(veth("v1x2", 2)), mode="always") as (daemon, fake):
        await eventually(lambda: daemon.mesh.state == "running")
        client = await connect(daemon.config.socket_path)
        assert await client.request("interface eth0") == [
            "bad unknown request 'interface', try help"
        ]
        await client.send(b"\xff\xfe\n")
        assert await client.until_status() == ["bad request is not UTF-8"]
        await client.send(b"x" * 1_000_000 + b"\n")
        assert await client.until_status() == ["bad request longer than 4096 bytes"]
        assert await client.request("dump now") == ["bad dump takes no arguments"]
        assert (await client.request("help"))[-1] == "ok"
        assert json.loads((await client.request("status"))[0])["mesh"] == "running"
        assert [r for r in fake.requests() if "eth0" in r or r.startswith("x")] == []


async def test_first_request_may_come_before_the_header_is_read() -> None:
    async with running(FakeKernel(veth("v1x2", 2))) as (daemon, _):
        client = await connect(daemon.config.socket_path, read_header=False)
        await client.send("status")
        lines = await client.until_status()  # the header's ok
        assert lines[0] == "BABEL 1.0"
        assert json.loads((await client.until_status())[0])["mesh"] == "idle"
        await client.send("quit")
        assert await client.readline() is None


async def test_on_demand_starts_with_a_subscriber_and_stops_after_linger() -> None:
    kernel = FakeKernel(veth("v1x2", 2))
    async with running(kernel, mode="on-demand", linger=0.3) as (daemon, fake):
        client = await connect(daemon.config.socket_path)
        for request in ("status", "dump"):
            await client.request(request)
        await reconciles(kernel)
        assert fake.starts() == [] and daemon.status()["mesh"] == "idle"
        assert kernel.addresses("v1x2") == set()
        watcher = await connect(daemon.config.socket_path)
        await watcher.send("watch")
        await eventually(lambda: daemon.mesh.state == "running", what="mesh started on watch")
        assert len(ours(kernel.addresses("v1x2"))) == 1
        pid = fake.starts()[0][0]
        left = trio.current_time()
        await watcher.aclose()
        await eventually(lambda: daemon.mesh.state == "idle", what="mesh idle after linger")
        assert trio.current_time() - left >= 0.3, "stopped before the linger ran out"
        await eventually(lambda: not alive(pid), what="babeld stopped")
        await eventually(lambda: kernel.addresses("v1x2") == set(), what="addresses removed")


async def test_waits_for_an_interface_before_starting_babeld() -> None:
    kernel = FakeKernel()
    async with running(kernel, mode="always") as (daemon, fake):
        await eventually(lambda: daemon.mesh.state == "waiting-for-interface")
        assert fake.starts() == []
        kernel.set_link(veth("v1x2", 2))
        await eventually(lambda: daemon.mesh.state == "running")


async def test_stopping_stops_babeld_and_removes_addresses_and_socket() -> None:
    kernel = FakeKernel(veth("v1x2", 2))
    async with running(kernel, mode="always") as (daemon, fake):
        await eventually(lambda: daemon.mesh.state == "running")
        socket_path = daemon.config.socket_path
    pid = fake.starts()[0][0]
    assert "stop" in fake.lines()
    assert not alive(pid)
    assert kernel.addresses("v1x2") == set()
    assert not socket_path.exists()


async def test_babeld_that_stops_answering_is_restarted() -> None:
    tunables = mesh_numbers(deadlines=Deadlines(request=0.5))
    kernel = FakeKernel(veth("v1x2", 2))
    async with running(kernel, "mute", tunables=tunables, mode="always") as (d, fake):
        await eventually(lambda: len(fake.starts()) >= 2, what="a restart after the hang")
        assert "did not answer 'monitor' within 0.5 s" in (d.mesh.last_error or "")


async def test_sighup_reload_applies_the_file_and_a_bad_file_changes_nothing(
    tmp_path: Path,
) -> None:
    config_file = tmp_path / "babblerd.toml"
    config_file.write_text('interface = ["v*"]\n')
    kernel = FakeKernel(veth("v1x2", 2), veth("v1x3", 3))
    async with running(kernel, mode="always", config=config_file) as (daemon, fake):
        await eventually(lambda: set(daemon.mesh.told) == {"v1x2", "v1x3"})
        config_file.write_text('interface = ["v*"]\nexclude = ["v1x3"]\nlinger = 7\n')
        await daemon.reload()
        await eventually(lambda: "flush interface v1x3" in fake.requests())
        assert daemon.config.exclude == ("v1x3",) and daemon.config.linger == 7
        assert [a["interface"] for a in daemon.status()["addresses"]] == ["v1x2"]
        config_file.write_text("exclude = [\n")
        await daemon.reload()
        assert daemon.config.exclude == ("v1x3",) and daemon.config.linger == 7
        assert daemon.mesh.state == "running"


async def test_babeld_ignoring_sigterm_is_killed_at_stop() -> None:
    tunables = mesh_numbers(deadlines=Deadlines(stop_grace=0.3))
    kernel = FakeKernel(veth("v1x2", 2))
    async with running(kernel, "stubborn", tunables=tunables, mode="always") as (daemon, fake):
        await eventually(lambda: daemon.mesh.state == "running")
        started = trio.current_time()
    pid = fake.starts()[0][0]
    assert not alive(pid)
    assert "stop" not in fake.lines()  # it never ran its SIGTERM handler: it was killed
    assert trio.current_time() - started < 3


async def test_backoff_grows_while_babeld_keeps_dying_and_resets_after_a_stable_run() -> None:
    """The pauses the supervisor chooses, as it logs them: doubling while babeld keeps
    dying, back to the first after a run of `stable_period` (the numbers: core/backoff.py's
    unit test)."""
    tunables = mesh_numbers(stable_period=1.0)
    async with running(FakeKernel(veth("v1x2", 2)), tunables=tunables, mode="always") as (
        daemon,
        fake,
    ):

        async def kill_when_running() -> None:
            await eventually(lambda: daemon.mesh.state == "running")
            count = len(fake.starts())
            os.kill(fake.starts()[-1][0], signal.SIGKILL)
            await eventually(lambda: len(fake.starts()) > count, what="babeld started again")

        with structlog.testing.capture_logs() as logs:
            for _ in range(4):
                await kill_when_running()
            await eventually(lambda: daemon.mesh.state == "running")
            await eventually(
                lambda: daemon.mesh.running_for() >= 1.0, timeout=10, what="a stable run"
            )
            await kill_when_running()
        delays = [e["delay"] for e in logs if e["event"] == "restarting babeld" and "delay" in e]
        assert delays == [0.1, 0.2, 0.4, 0.8, 0.1]
        assert daemon.mesh.restarts == 5


async def test_requests_sent_with_quit_in_one_write_are_all_answered() -> None:
    # `printf 'status\nquit\n' | nc -U ...`: the answer must go out before the connection
    # closes, and a client that leaves at once is not an error in the log.
    async with running(FakeKernel(veth("v1x2", 2)), mode="always") as (daemon, _):
        await eventually(lambda: daemon.mesh.state == "running")
        for _ in range(20):
            client = await connect(daemon.config.socket_path, read_header=False)
            await client.send(b"status\ndump\nquit\n")
            lines = []
            while (line := await client.readline()) is not None:
                lines.append(line)
            assert lines[:5] == daemon.view.header()
            assert json.loads(lines[5])["mesh"] == "running" and lines[6] == "ok"
            assert lines[-1] == "ok" and lines.count("ok") == 3
            await client.aclose()


async def test_babeld_cutting_the_connection_is_reconnected_not_restarted() -> None:
    """babeld shuts its control connection down when a write to us waits 100 ms (a slow
    reader) and stays up. babblerd connects again: same babeld, no restart, and clients
    see only what really changed meanwhile (here: its xroute is gone)."""
    streamed = mesh_numbers(dump_interval=0.1)  # babeld monitored: no unmonitor, no dumps
    kernel = FakeKernel(veth("v1x2", 2))
    async with running(kernel, fake_mode="cut", mode="always", tunables=streamed) as (d, fake):
        await eventually(lambda: d.mesh.state == "running")
        monitor = await connect(d.config.socket_path)
        snapshot = await monitor.request("monitor")
        assert any(line.startswith("add xroute x1") for line in snapshot)
        line = await monitor.readline()  # the fake cuts 0.5 s after the first monitor
        assert line is not None and line.startswith("flush xroute x1"), line
        await eventually(lambda: fake.requests().count("monitor") == 2, what="a new monitor")
        assert len(fake.starts()) == 1, "babeld was restarted"
        assert d.mesh.restarts == 0 and d.mesh.state == "running"
        assert sorted(d.view.dump_lines()) == sorted(
            line for line in snapshot[:-1] if not line.startswith("add xroute")
        )
        # nothing else: the re-dump adds nothing new, so the next line is the next real
        # change (babeld drops its route)
        os.kill(fake.starts()[0][0], signal.SIGUSR1)
        line = await monitor.readline()
        assert line is not None and line.startswith("flush route 5600000000b1"), line


async def test_babeld_started_early_is_adopted_not_started_again() -> None:
    async with running(FakeKernel(veth("v1x2", 2)), early_on="v1x2", mode="always") as (d, fake):
        await eventually(lambda: d.mesh.state == "running")
        assert len(fake.starts()) == 1, "a second babeld was started"
        assert d.status()["babeld"]["pid"] == fake.early_pid == fake.starts()[0][0]
        assert d.mesh.restarts == 0 and d.view.my_id == d.mesh.my_id


async def test_the_early_start_and_the_daemon_work_out_one_launch() -> None:
    # IPv4 on and a fast link (its own cost, v4-via-v6): the early babeld is the one the
    # daemon would start, so it is adopted.
    fast = replace(veth("v1x2", 2), speed_mbps=40000)
    prefix = IPv4Network("10.77.0.0/16")
    kernel = FakeKernel(fast)
    async with running(kernel, early_on="v1x2", mode="always", ipv4_prefix=prefix) as (d, fake):
        await eventually(lambda: d.mesh.state == "running")
        assert len(fake.starts()) == 1, "the early babeld was not adopted"
        assert d.status()["babeld"]["pid"] == fake.early_pid


async def test_an_early_babeld_started_otherwise_is_replaced() -> None:
    # Its interface options differ from the daemon's (here the hello interval): adopting it
    # would run babeld with what the settings no longer say.
    kernel = FakeKernel(veth("v1x2", 2))
    early = {"hello_interval": 0.5}
    async with running(kernel, early_on="v1x2", early_settings=early, mode="always") as (d, fake):
        await eventually(lambda: d.mesh.state == "running")
        assert fake.early_pid is not None and not alive(fake.early_pid), "early babeld left"
        assert d.status()["babeld"]["pid"] != fake.early_pid


async def test_babeld_started_early_on_a_link_the_daemon_does_not_use_is_replaced() -> None:
    async with running(FakeKernel(veth("v1x2", 2)), early_on="v9x9", mode="always") as (d, fake):
        await eventually(lambda: d.mesh.state == "running")
        assert fake.early_pid is not None and not alive(fake.early_pid), "early babeld left"
        own_pid = d.status()["babeld"]["pid"]
        assert own_pid is not None and own_pid != fake.early_pid
        assert d.mesh.session is not None and d.mesh.session.launch.first_interface == "v1x2"


async def test_unwatched_babeld_is_dumped_not_monitored_and_a_gone_route_goes() -> None:
    """Nobody watching: babblerd stops babeld's `monitor` stream and reads `dump`s instead;
    a route babeld drops meanwhile leaves `status`; a watcher brings `monitor` back, and its
    snapshot and stream stay a consistent table (no route added twice, none left behind)."""
    # dumps pay at hello 0.1 s: 4 x 0.1 <= 0.4
    tunables = mesh_numbers(unwatched_grace=0.3, dump_interval=0.4)
    kernel = FakeKernel(veth("v1x2", 2))
    async with running(kernel, tunables=tunables, mode="always") as (daemon, fake):
        await eventually(lambda: "unmonitor" in fake.requests(), what="unmonitor")
        await eventually(lambda: fake.requests()[-1:] == ["dump"], what="dumps")
        assert not daemon.mesh.monitoring
        client = await connect(daemon.config.socket_path)

        async def routes() -> list[str]:
            return [r["prefix"] for r in json.loads((await client.request("status"))[0])["routes"]]

        assert len(await routes()) == 1
        os.kill(fake.starts()[0][0], signal.SIGUSR1)  # the route is gone from babeld's table
        await eventually(lambda: not daemon.status()["routes"], what="the route gone")
        assert await routes() == [], "status over the socket still has the route"

        monitor = await connect(daemon.config.socket_path)
        snapshot = await monitor.request("monitor")
        assert not any(line.startswith("add route") for line in snapshot)
        await eventually(lambda: daemon.mesh.monitoring, what="babeld monitoring again")
        assert fake.requests().count("monitor") == 2  # the session's, then the watcher's
        # the watcher's snapshot from babeld changed nothing: the next line is the next
        # real change (a new link babeld is told about)
        kernel.set_link(veth("v1x3", 3))
        line = await monitor.readline()
        assert line is not None and line.startswith("add interface v1x3"), line


async def test_unwatched_dumps_slow_while_no_route_moves_and_one_that_moves_is_read_soon() -> None:
    """Where the kernel says when babeld's routes change: with nobody watching and no route
    moving, babeld's table is dumped every `quiet_interval`, not every `dump_interval`; a
    route moving in the kernel brings a dump long before the quiet one is due."""
    tunables = mesh_numbers(
        unwatched_grace=0.3, dump_interval=0.4, quiet_interval=60.0, quiet_after=1.0
    )
    kernel = FakeKernel(veth("v1x2", 2))
    kernel.routes_trigger = True
    async with running(kernel, tunables=tunables, mode="always") as (daemon, fake):

        def dumps() -> int:
            return fake.requests().count("dump")

        await eventually(lambda: dumps() >= 1, what="dumps")
        await trio.sleep(3.0)  # quiet_after passed: the next dump is a minute away
        quiet = dumps()
        await trio.sleep(3.0)  # a dump every 0.4 s would be 7 more
        assert dumps() == quiet
        kernel.route_changed()  # babeld installed, removed or moved a route
        await eventually(lambda: dumps() > quiet, 10.0, "a dump after the route moved")
        assert daemon.mesh.state == "running"


async def test_a_babeld_started_while_nobody_watches_is_not_monitored_for_a_grace() -> None:
    """The grace before `unmonitor` is for a watcher that just left (it may come back), not
    for a babeld just started: with nobody ever watching, its `monitor` stream (babeld
    notifying every route each hello) is stopped at once, and a restarted babeld's too."""
    tunables = mesh_numbers(unwatched_grace=60.0, dump_interval=0.4)
    async with running(FakeKernel(veth("v1x2", 2)), tunables=tunables, mode="always") as (
        daemon,
        fake,
    ):
        await eventually(lambda: "unmonitor" in fake.requests(), 10.0, "unmonitor in the grace")
        await eventually(lambda: not daemon.mesh.monitoring, what="not monitoring")
        assert daemon.mesh.state == "running" and fake.requests().count("monitor") == 1


async def test_thunderbolt_links_come_up_once_by_themselves_and_go_down_at_stop() -> None:
    """A thunderbolt-net link appears down (Linux makes it so when a cable is plugged):
    babblerd brings it up, and a --bring-up one; an excluded one stays down; one that
    someone sets down later stays down; at stop they go down again, as found."""
    tb = Link("thunderbolt0", 3, driver="thunderbolt-net", has_device=True)
    glob = Link("vb1", 4, kind="veth")
    excluded = Link("thunderbolt9", 5, driver="thunderbolt-net", has_device=True)
    kernel = FakeKernel(veth("v1x2", 2), tb, glob, excluded)
    async with running(
        kernel,
        mode="always",
        interface=("v*", "thunderbolt*"),
        exclude=("thunderbolt9",),
        bring_up=("vb*",),
    ) as (daemon, _):
        await eventually(lambda: kernel.links["thunderbolt0"].up and kernel.links["vb1"].up)
        shown = {i["name"]: i["brought_up"] for i in daemon.status()["interfaces"]}
        assert shown == {"thunderbolt0": True, "vb1": True, "v1x2": False}
        assert not kernel.links["thunderbolt9"].up
        kernel.set_link(replace(kernel.links["vb1"], up=False))  # an admin: ip link set down
        await reconciles(kernel)  # they come and go: it stays down
        assert not kernel.links["vb1"].up
        await eventually(lambda: not daemon.status()["interfaces"][-1]["brought_up"])
    assert not kernel.links["thunderbolt0"].up  # put down again
    assert not kernel.links["vb1"].up and not kernel.links["thunderbolt9"].up


class StubbornKernel(FakeKernel):
    """A driver that takes no other MTU."""

    async def set_mtu(self, link: Link, size: int) -> None:
        from babbler.core.errors import KernelError

        raise KernelError("Invalid argument", 22)


FAR = 0xAAAABBBBCCCC  # the node the fake babeld has as its neighbour


def far_end(max_mtu: int) -> Any:
    """The neighbour's info: its link tb9 faces this node's thunderbolt0 (the fake babeld's
    link-local on every link is fe80::1)."""
    from babbler.daemon.nodes.book import Known

    info = {
        "node_id": "aaaabbbbcccc",
        "neighbours": [{"node_id": None, "interface": "tb9", "address": "fe80::1"}],
        "interfaces": [{"name": "tb9", "max_mtu": max_mtu}],
    }
    return Known(FAR, info=info, fetched_at=0.0)


async def test_a_thunderbolt_cable_takes_the_far_ends_size_and_a_refusal_is_said_once() -> None:
    tb = Link(
        "thunderbolt0",
        3,
        driver="thunderbolt-net",
        up=True,
        link_local=True,
        mtu=1500,
        max_mtu=65520,
    )
    for kernel in (FakeKernel(veth("v1x2", 2), tb), StubbornKernel(veth("v1x2", 2), tb)):
        async with running(kernel, mode="always", interface=("v*", "thunderbolt*")) as (daemon, _):
            await eventually(lambda: daemon.mesh.state == "running")
            with structlog.testing.capture_logs() as logs:
                daemon.nodes.book.nodes[FAR] = far_end(9000)
                daemon.reconcile.cables_changed.notify()  # as a far end's answer does
                await reconciles(kernel)  # each sizes the cable again
            refused = [e for e in logs if e["event"] == "cannot set MTU"]
            if isinstance(kernel, StubbornKernel):
                assert kernel.links["thunderbolt0"].mtu == 1500 and len(refused) == 1
            else:
                assert kernel.links["thunderbolt0"].mtu == 9000 and not refused
                assert kernel.links["v1x2"].mtu is None  # not a Thunderbolt link: not sized


@pytest.mark.parametrize("platform", [LINUX, MACOS], ids=["linux", "macos"])
async def test_the_platform_decides_babelds_options_the_fence_and_status(
    platform: Platform,
) -> None:
    """The platform is one value: as macOS (the lab's macOS nodes), babeld gets no export
    table and `v4-via-v6 false` (macOS's babeld has none; Linux's would turn it on), no
    policy rule is set, and status says so; as Linux, the opposite."""
    linux = platform is LINUX
    kernel = FakeKernel(veth("v1x2", 2), veth("v1x3", 3))
    async with running(kernel, mode="always", platform=platform) as (daemon, fake):
        await eventually(lambda: daemon.mesh.state == "running", what="mesh running")
        await eventually(lambda: ours(kernel.addresses("v1x3")), what="v1x3 addressed")
        told = f"{V1X3_ADDED.removesuffix(' true')} {'true' if linux else 'false'}"
        await eventually(lambda: told in fake.requests(), what="v1x3 told to babeld")
        settings = (daemon.config.private_dir / "babeld.conf").read_text()
        assert ("export-table" in settings) is linux
        if linux:
            await eventually(lambda: kernel.rules, what="the fence's rules")
        assert bool(kernel.rules) is linux
        client = await connect(daemon.config.socket_path)
        status = json.loads((await client.request("status"))[0])
        assert status["platform"] == platform.key


async def test_on_macos_a_new_cable_has_its_ipv4_address_before_babeld_is_told_of_it() -> None:
    """babeld without v4-via-v6 flushes a link's routes when the link's IPv4 address
    appears: the far end is found first (an echo to ff02::1: the fake kernel's `far`), the
    cable's /31 added, and only then is babeld told about the link (its first, or added);
    a link whose probe finds nobody (v1x2) is told all the same."""
    kernel = FakeKernel(veth("v1x2", 2), veth("v1x3", 3))
    kernel.far["v1x3"] = (IPv6Address("fe80::1"), {IPv6Address("fe80::2")})
    kernel.far_delay = 0.5  # the answers take a while: babeld must not be told meanwhile

    def told(name: str, event: MutableMapping[str, Any]) -> bool:
        launched = event["event"] == "starting babeld" and event["args"][-1] == name
        added = event["event"] == "babeld interface added" and event["interface"] == name
        return bool(launched or added)

    with structlog.testing.capture_logs() as logs:
        async with running(kernel, mode="always", platform=MACOS):
            await eventually(lambda: all(any(told(n, e) for e in logs) for n in ("v1x2", "v1x3")))
    cable = next(
        i
        for i, e in enumerate(logs)
        if e["event"] == "address added" and e["interface"] == "v1x3" and "." in e["address"]
    )
    babeld = next(i for i, e in enumerate(logs) if told("v1x3", e))
    assert cable < babeld, [e["event"] for e in logs]
    found = [e for e in logs if e["event"] == "far end found before babeld"]
    assert [(e["interface"], e["far"]) for e in found] == [("v1x3", "fe80::2")]
