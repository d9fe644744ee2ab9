"""`babblerctl web` without a browser: --listen, the Host check, its one-line errors, and that
babblerctl does not pay for starlette and hypercorn unless the page is served."""

from __future__ import annotations

import socket
import subprocess
import sys
from ipaddress import IPv4Address, IPv6Address

import pytest
from hypothesis import given
from hypothesis import strategies as st

from babbler.core.errors import BabblerError
from babbler.live.web import Listen, host_allowed, parse_listen

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
