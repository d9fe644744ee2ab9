"""`babblerctl web` without a browser: --listen, the Host check, its one-line errors, that
babblerctl does not pay for starlette and hypercorn unless the page is served, and when the
pages' shared view asks babblerd what (a fake public socket, trio's mock clock)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import aclosing
from ipaddress import IPv4Address, IPv6Address
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from babbler.core.errors import BabblerError
from babbler.live.listen import Listen, host_allowed, parse_listen
from babbler.live.web import LINGER, TICK, Hub

CTL = [sys.executable, "-m", "babbler.ctl.main"]
PORTS = st.integers(1, 65535)


@given(st.ip_addresses(v=4), PORTS)
def test_an_ipv4_address_and_port_is_read_back(host: IPv4Address, port: int) -> None:
    listen = parse_listen(f"{host}:{port}")
    assert listen == Listen(host, port)
    assert parse_listen(listen.bind) == listen


@given(st.ip_addresses(v=6), PORTS)
def test_an_ipv6_address_in_brackets_is_read_back(host: IPv6Address, port: int) -> None:
    listen = parse_listen(f"[{host}]:{port}")
    assert listen == Listen(host, port)
    assert listen.url == f"http://[{host}]:{port}/"
    assert parse_listen(listen.bind) == listen


@given(st.text(max_size=40))
def test_anything_else_is_one_line_saying_what_to_write(text: str) -> None:
    try:
        parse_listen(text)
    except BabblerError as error:
        assert "\n" not in str(error) and "--listen" in str(error)


@pytest.mark.parametrize(
    ("given_text", "said"),
    [
        ("8770", "ADDRESS:PORT"),
        ("localhost:8770", "not an IP address"),
        ("::1:8770", "in brackets ([::1]:8770)"),
        ("[::1]8770", "ADDRESS:PORT"),
        ("[127.0.0.1]:8770", "ADDRESS:PORT"),
        ("127.0.0.1:0", "1-65535"),
        ("127.0.0.1:65536", "1-65535"),
        ("127.0.0.1:http", "1-65535"),
        ("127.0.0.1:", "1-65535"),
    ],
)
def test_a_bad_listen_says_why(given_text: str, said: str) -> None:
    with pytest.raises(BabblerError, match="--listen") as raised:
        parse_listen(given_text)
    assert said in str(raised.value)


def test_loopback_is_served_only_to_loopback_names() -> None:
    local = parse_listen("127.0.0.1:8770")
    for host in ("127.0.0.1:8770", "localhost:8770", "LOCALHOST", "[::1]:8770", "127.0.0.2"):
        assert host_allowed(host, local), host
    # a site the browser visits, its name rebound to 127.0.0.1, may not read the mesh
    for host in ("evil.example:8770", "10.0.0.1:8770", "", "[fe80::1]:8770", "127.0.0.1.nip.io"):
        assert not host_allowed(host, local), host
    exposed = parse_listen("[::]:8770")
    assert not exposed.loopback
    assert host_allowed("evil.example:8770", exposed)


def test_importing_the_command_leaves_starlette_and_hypercorn_out() -> None:
    code = (
        "import sys, babbler.ctl.main, babbler.live.web; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'starlette', 'hypercorn'}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_help_says_what_listening_beyond_loopback_exposes() -> None:
    done = subprocess.run([*CTL, "web", "--help"], capture_output=True, text=True, check=True)
    text = " ".join(done.stdout.split())
    assert "--listen ADDRESS:PORT" in text
    assert "anyone who can reach the port" in text
    assert "no authentication" in text
    assert "ssh -L" in text


def test_a_port_in_use_is_one_line() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        args = [*CTL, "web", "--socket", "/nonexistent", "--listen", f"127.0.0.1:{port}"]
        done = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"babblerctl: cannot listen on 127.0.0.1:{port}: the port is in use "
        "(another babblerctl web?); pick another with --listen"
    ]


def test_a_bad_listen_is_one_line_too() -> None:
    done = subprocess.run(
        [*CTL, "web", "--listen", "::1:8770"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "babblerctl: --listen: write an IPv6 address in brackets ([::1]:8770)"
    ]


def test_no_babblerd_at_the_socket_is_one_line(tmp_path: object) -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    args = [*CTL, "web", "--socket", "/nonexistent/b.sock", "--listen", f"127.0.0.1:{port}"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert len(done.stderr.splitlines()) == 1
    assert "/nonexistent/b.sock" in done.stderr


class FakeBabblerd:
    """The public socket as the page's Hub uses it: answers recorded with the (mock) time,
    a `watch` that sends an event every `every` seconds."""

    def __init__(self, every: float) -> None:
        self.every = every
        self.asked: list[tuple[float, str]] = []

    async def request(self, request: str) -> list[str]:
        now = trio.current_time()
        self.asked.append((now, request))
        if request == "status":
            return [json.dumps({"node_id": "00000000000a", "name": "n1", "nodes": []})]
        return [json.dumps({"at": now, "nodes": []})]

    async def watch(self) -> AsyncIterator[object]:
        while True:
            await trio.sleep(self.every)
            yield {"type": "route"}


async def open_page(hub: Hub, seconds: float) -> list[dict[str, Any]]:
    got = []
    with trio.move_on_after(seconds):
        async with aclosing(hub.follow()) as payloads:
            async for payload in payloads:
                got.append(json.loads(payload))
    return got


async def test_a_page_gets_counters_each_second_however_busy_and_nobody_asks_once_closed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    babblerd = FakeBabblerd(every=0.2)  # a busy mesh: five events a second
    hub = Hub(Path("/nonexistent"))
    hub.client = babblerd  # type: ignore[assignment]
    async with trio.open_nursery() as nursery:
        await nursery.start(hub.run)
        shown = await open_page(hub, 10)
        counters = [at for at, what in babblerd.asked if what == "counters"]
        statuses = [at for at, what in babblerd.asked if what == "status"]
        assert 9 <= len(counters) <= 11  # once a TICK, not once an event
        assert len(statuses) >= 25  # each event is shown within SETTLE
        assert len(shown) >= 25 and shown[-1]["mesh"]["me"] == "00000000000a"
        await trio.sleep(LINGER + 2 * TICK)
        asked = len(babblerd.asked)
        await trio.sleep(60)  # no page open: babblerd is asked nothing
        assert len(babblerd.asked) == asked
        shown = await open_page(hub, 3)  # a page again: live again
        assert len(babblerd.asked) > asked and shown
        nursery.cancel_scope.cancel()
