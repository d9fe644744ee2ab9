"""`babblerctl web` without a browser: --listen, the Host check, --allow-host, the refusal of
other sites' requests, its one-line errors, that
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
from babbler.live.listen import Listen, host_allowed, parse_allow_host, parse_listen, refusal
from babbler.live.web import LINGER, TICK, Hub, guarded

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
    assert host_allowed("mesh.lan:8770", local, frozenset({"mesh.lan"}))  # --allow-host


def test_off_loopback_only_the_listen_address_and_allowed_names_are_served() -> None:
    lan = parse_listen("192.168.1.5:8770")
    assert not lan.loopback
    for host in ("192.168.1.5:8770", "192.168.1.5"):
        assert host_allowed(host, lan), host
    # a site's name rebound to the LAN address may not read the mesh, nor another address
    for host in ("evil.example:8770", "localhost:8770", "10.0.0.1:8770", "", "192.168.1.5.nip.io"):
        assert not host_allowed(host, lan), host
    names = frozenset({parse_allow_host("Mesh.LAN."), parse_allow_host("[FE80::0001]")})
    assert names == {"mesh.lan", "fe80::1"}
    for host in ("mesh.lan:8770", "MESH.lan", "[fe80:0::1]:8770"):
        assert host_allowed(host, lan, names), host
    assert not host_allowed("evil.example:8770", lan, names)
    v6 = parse_listen("[2001:db8::5]:8770")
    assert host_allowed("[2001:DB8:0::5]:8770", v6)
    assert not host_allowed("[2001:db8::6]:8770", v6)
    every = parse_listen("[::]:8770")  # every address: any address, no name
    for host in ("192.168.1.5:8770", "[2001:db8::5]:8770", "127.0.0.1:8770"):
        assert host_allowed(host, every), host
    for host in ("evil.example:8770", "localhost:8770"):
        assert not host_allowed(host, every), host


@pytest.mark.parametrize(
    ("given_text", "said"),
    [("mesh.lan:8770", "without a port"), ("evil_name", "DNS name"), ("a..b", "DNS name")],
)
def test_a_bad_allow_host_says_why(given_text: str, said: str) -> None:
    with pytest.raises(BabblerError, match="--allow-host") as raised:
        parse_allow_host(given_text)
    assert said in str(raised.value)


LOCAL = parse_listen("127.0.0.1:8770")
HOST = {"host": "127.0.0.1:8770"}
PAGE_FETCH = {**HOST, "sec-fetch-site": "same-origin", "sec-fetch-mode": "cors"}
CROSS = {"sec-fetch-site": "cross-site", "sec-fetch-mode": "no-cors", "sec-fetch-dest": "empty"}


@pytest.mark.parametrize("path", ["/events", "/api/mesh", "/metrics", "/"])
@pytest.mark.parametrize(
    "headers",
    [
        {**HOST, **CROSS},  # another site's page: a no-cors fetch, an <img>
        {**HOST, **CROSS, "sec-fetch-site": "same-site"},  # another port of 127.0.0.1
        {**HOST, **CROSS, "sec-fetch-dest": "iframe", "sec-fetch-mode": "navigate"},
        {**HOST, "origin": "https://evil.example"},  # a browser without Sec-Fetch-*
        {**HOST, "origin": "null"},  # a sandboxed frame, a file:// page
        {**PAGE_FETCH, "origin": "http://127.0.0.1:9999"},  # another port's page
    ],
)
def test_another_sites_request_is_refused(path: str, headers: dict[str, str]) -> None:
    assert refusal("GET", path, headers, LOCAL) == (
        403,
        "refused: a request from another site's page\n",
    )


@pytest.mark.parametrize("path", ["/events", "/api/mesh", "/metrics", "/", "/static/mesh.js"])
@pytest.mark.parametrize(
    "headers",
    [
        HOST,  # curl, Prometheus
        PAGE_FETCH,  # the page's own fetch and EventSource
        {**PAGE_FETCH, "origin": "http://127.0.0.1:8770"},
        {**HOST, "sec-fetch-site": "none", "sec-fetch-mode": "navigate"},  # typed, bookmarked
        {"host": "[::1]:8770", "origin": "http://[::1]:8770", "sec-fetch-site": "same-origin"},
    ],
)
def test_the_page_itself_and_clients_without_a_browser_are_served(
    path: str, headers: dict[str, str]
) -> None:
    assert refusal("GET", path, headers, LOCAL) is None


def test_a_link_from_another_site_opens_the_page_but_nothing_else() -> None:
    link = {**HOST, **CROSS, "sec-fetch-mode": "navigate", "sec-fetch-dest": "document"}
    assert refusal("GET", "/", link, LOCAL) is None
    assert refusal("GET", "/events", link, LOCAL) is not None
    assert refusal("POST", "/", link, LOCAL) is not None


def test_a_rebound_name_is_misdirected_before_anything_else() -> None:
    rebound = {**PAGE_FETCH, "host": "evil.example:8770"}
    refused = refusal("GET", "/api/mesh", rebound, LOCAL)
    assert refused is not None and refused[0] == 421 and "--allow-host" in refused[1]


async def ask(app: Any, headers: list[tuple[bytes, bytes]], path: str = "/events") -> list[Any]:
    """One request through the app as hypercorn hands it over; what it sent back."""
    sent: list[Any] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Any) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": path, "headers": headers}
    await app(scope, receive, send)
    return sent


async def test_the_server_refuses_before_the_route_runs() -> None:
    reached: list[str] = []

    async def route(scope: Any, receive: Any, send: Any) -> None:
        reached.append(scope["path"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"mesh"})

    app = guarded(route, LOCAL, frozenset())
    host = (b"host", b"127.0.0.1:8770")
    sent = await ask(app, [host, (b"sec-fetch-site", b"cross-site")])
    assert sent[0]["status"] == 403 and b"another site" in sent[1]["body"] and not reached
    # a second Sec-Fetch-Site does not hide the first
    twice = [host, (b"Sec-Fetch-Site", b"cross-site"), (b"sec-fetch-site", b"same-origin")]
    assert (await ask(app, twice))[0]["status"] == 403 and not reached
    sent = await ask(app, [host, (b"sec-fetch-site", b"same-origin")])
    assert sent[0]["status"] == 200 and reached == ["/events"]
    assert b"content-security-policy" in dict(sent[0]["headers"])


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
    assert "--allow-host NAME" in text and "DNS rebinding" in text
    assert "Sec-Fetch-Site" in text and "refused (403)" in text


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
