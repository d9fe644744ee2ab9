"""The public socket's promises to clients, against a daemon with a fake babeld: every
request ends with one status line, a client's queue is bounded in bytes, and a burst of
connections is accepted."""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path

import trio

from babbler.daemon.fanout import Limits
from babbler.daemon.lifecycle import Tunables
from babbler.daemon.requests import REQUESTS
from tests.component.harness import connect, eventually, running, veth
from tests.fakes.kernel import FakeKernel

STATUS_LINES = ("ok", "no", "bad")


def is_status(line: str) -> bool:
    return line.split(" ", 1)[0] in STATUS_LINES


async def test_every_request_known_or_not_ends_with_exactly_one_status_line() -> None:
    async with running(FakeKernel(veth("v1x2", 2)), mode="always") as (daemon, _):
        await eventually(lambda: daemon.mesh.state == "running")
        client = await connect(daemon.config.socket_path)
        asked = [n for n, r in REQUESTS.items() if r.ends == "status"]
        asked += ["nonsense", "dump extra", "\x1b[2J", "status status"]
        for request in asked:
            # The request, then `help` as a marker: exactly one status line must come
            # before help's own lines, whatever the request was.
            await client.send(request)
            await client.send("help")
            lines = await client.until_status()
            lines += await client.until_status()
            statuses = [i for i, line in enumerate(lines) if is_status(line)]
            assert len(statuses) == 2, (request, lines)
            assert lines[statuses[0] + 1].startswith("dump: "), (request, lines)
        assert {r.ends for r in REQUESTS.values()} == {"status", "stream", "close"}


async def test_help_is_the_request_table() -> None:
    async with running(FakeKernel(veth("v1x2", 2))) as (daemon, _):
        client = await connect(daemon.config.socket_path)
        lines = await client.request("help")
        assert [line.split(":")[0] for line in lines[:-1]] == list(REQUESTS)


async def test_a_client_that_never_reads_is_cut_off_with_bounded_memory() -> None:
    tunables = Tunables(clients=Limits(stall_limit=1.0))
    kernel = FakeKernel(veth("v1x2", 2))
    async with running(kernel, tunables=tunables, mode="always") as (daemon, _):
        await eventually(lambda: daemon.mesh.state == "running")
        other = await connect(daemon.config.socket_path)
        before = json.loads((await other.request("stats"))[0])
        hog = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        hog.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        hog.connect(str(daemon.config.socket_path))
        hog.setblocking(False)
        await eventually(lambda: len(daemon.hub.clients) == 2, what="the hog accepted")
        sent = 0
        with hog, trio.move_on_after(30):
            while len(daemon.hub.clients) == 2:  # the hog is still connected
                try:
                    sent += hog.send(b"dump\n" * 1000)
                except BlockingIOError:
                    pass  # the daemon stopped reading its requests: it is behind
                except (BrokenPipeError, ConnectionResetError):
                    break
                biggest = max(c.queued for c in daemon.hub.clients)
                assert biggest <= daemon.hub.limits.queue_bytes
                await trio.sleep(0.01)
        assert len(daemon.hub.clients) == 1, "the never-reading client was not cut off"
        assert sent > 100_000, f"only {sent} bytes of requests were sent"
        after = json.loads((await other.request("stats"))[0])
        assert after["rss_bytes"] - before["rss_bytes"] < 32 << 20
        assert json.loads((await other.request("status"))[0])["mesh"] == "running"


async def test_a_burst_of_connections_with_timeouts_is_accepted() -> None:
    async with running(FakeKernel(veth("v1x2", 2))) as (daemon, _):
        path = str(daemon.config.socket_path)
        opened = []
        try:
            # Connected in a row without yielding to the daemon, which therefore accepts
            # none of them meanwhile: all 500 must fit into the listen backlog.
            for _ in range(500):
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                opened.append(sock)
                sock.settimeout(5)
                sock.connect(path)  # with a timeout: EAGAIN at once if the backlog is full
        finally:
            for sock in opened:
                sock.close()
        assert len(opened) == 500


async def test_clients_counts_the_others_not_the_one_asking() -> None:
    async with running(FakeKernel(veth("v1x2", 2))) as (daemon, _):
        first = await connect(daemon.config.socket_path)
        assert json.loads((await first.request("status"))[0])["clients"] == 0
        second = await connect(daemon.config.socket_path)
        await eventually(lambda: len(daemon.hub.clients) == 2)
        assert json.loads((await second.request("status"))[0])["clients"] == 1


async def test_a_missing_babeld_shows_in_status_while_idle() -> None:
    async with running(FakeKernel(veth("v1x2", 2)), babeld="/nonexistent/babeld") as (d, _):
        client = await connect(d.config.socket_path)
        status = json.loads((await client.request("status"))[0])
        assert status["mesh"] == "idle" and status["babeld"]["found"] is False
    async with running(FakeKernel(veth("v1x2", 2))) as (d, _):
        client = await connect(d.config.socket_path)
        assert json.loads((await client.request("status"))[0])["babeld"]["found"] is True


async def test_refused_clients_that_already_left_do_not_stop_the_server() -> None:
    """At the connection limit, a client that connects and leaves at once (a connect storm
    while the daemon is full) makes the refusal's write fail: the daemon serves on. Seen in
    the hostile-clients test: the whole daemon went down with that write's error."""
    tunables = Tunables(clients=Limits(max_clients=2))
    kernel = FakeKernel(veth("v1x2", 2))
    async with running(kernel, tunables=tunables, mode="always") as (daemon, _):
        await eventually(lambda: daemon.mesh.state == "running")
        path = str(daemon.config.socket_path)
        first = await connect(daemon.config.socket_path)
        second = await connect(daemon.config.socket_path)
        await eventually(lambda: len(daemon.hub.clients) == 2, what="two clients")
        for _ in range(200):
            gone = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            gone.connect(path)
            gone.close()
        refused = await connect(daemon.config.socket_path, read_header=False)
        assert await refused.readline() == "no too many clients"
        assert json.loads((await first.request("status"))[0])["mesh"] == "running"
        await second.aclose()
        await eventually(lambda: len(daemon.hub.clients) == 1, what="one left")
        third = await connect(daemon.config.socket_path)
        assert json.loads((await third.request("status"))[0])["mesh"] == "running"


async def test_babeld_installed_while_the_daemon_waits_is_found_at_its_next_start(
    tmp_path: Path,
) -> None:
    """babeld's presence is looked up per babeld start (and on reload), not per `status`:
    installed while the daemon backs off, it is found, started, and shown as found."""
    later = tmp_path / "babeld"
    kernel = FakeKernel(veth("v1x2", 2))
    async with running(kernel, mode="always", babeld=str(later)) as (d, fake):
        client = await connect(d.config.socket_path)
        await eventually(lambda: d.mesh.restarts >= 1, what="a failed start")
        status = json.loads((await client.request("status"))[0])
        assert status["babeld"]["found"] is False and status["mesh"] != "running"
        shutil.copy(fake.wrapper, later)  # installed now
        await eventually(lambda: d.mesh.state == "running", timeout=40, what="babeld started")
        assert json.loads((await client.request("status"))[0])["babeld"]["found"] is True
