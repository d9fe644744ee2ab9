"""`babblerctl doctor --probe` judged (core/probe.py) and run in layers (ctl/probe.py), and
`--bundle` (ctl/bundle.py): a drop told from a refusal, routes named by cable, what lies
over the mesh's prefixes named with its owner, the first failing layer the last probed,
and never a key in a bundle."""

from __future__ import annotations

import contextlib
import errno
import json
import socket
import tarfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from ipaddress import IPv4Network, IPv6Network, ip_network
from pathlib import Path

import pytest

from babbler.core import probe as judge
from babbler.core.platform import LINUX, MACOS
from babbler.core.probe import FAIL, OK, WARN, CableProbe, HostEntry, NodeProbe, Outcome, RouteSeen
from babbler.ctl import bundle
from babbler.ctl import probe as acting
from babbler.ctl.doctor import run_command
from babbler.ui.doctor import Check, Facts
from tests.unit.samples import typed
from tests.unit.test_darwin import NETSTAT_INET_MESH

PREFIX = IPv4Network("10.77.0.0/16")


def entry(network: str, device: str, kernel: bool = False) -> HostEntry:
    net = ip_network(network)
    return HostEntry(net, device, f"route {net} dev {device}", kernel)


def test_a_drop_is_told_apart_from_a_refusal() -> None:
    dropped = judge.cause(Outcome(timed_out=True), 6699, "its bench responder", "n2")
    refused = judge.cause(Outcome(errno=errno.ECONNREFUSED), 6699, "its bench responder", "n2")
    assert dropped[0] == refused[0] == FAIL
    assert dropped[1].startswith("dropped: no answer within 2 s") and "firewall" in dropped[1]
    assert "port 6699" in dropped[2] and "n2" in dropped[2]
    assert refused[1].startswith("refused: nothing listens on port 6699")
    assert "its bench responder is not running at n2" in refused[2]
    assert judge.cause(Outcome(errno=errno.ETIMEDOUT), 1, "x")[1].startswith("dropped")
    assert judge.cause(Outcome(said="busy"), 1, "x")[0] == WARN
    assert "cable address is gone" in judge.cause(Outcome(errno=99, stage="bind"), 1, "x")[1]
    assert judge.cause(Outcome(errno=errno.EHOSTUNREACH), 1, "x")[1] == "no route to it"


def test_cable_lines_say_the_rate_or_the_cause() -> None:
    fast = Outcome(seconds=0.001, nbytes=judge.MiB)
    lines = judge.cable_lines(
        [
            CableProbe("v1x2", "n2", "10.77.0.128", "10.77.0.129", fast),
            CableProbe("v1x3", "n3", "10.77.0.130", "10.77.0.131", Outcome(timed_out=True)),
            CableProbe("v1x4", "n4", None, None, why_none="route 10.77.1.0/24 overlaps"),
        ],
        6699,
    )
    assert lines[0] == (
        "cable v1x2", OK, "10.77.0.128 to n2's 10.77.0.129: 1 MiB in 1.0 ms, 8.39 Gbit/s", "",
    )  # fmt: skip
    assert lines[1][:2] == ("cable v1x3", FAIL) and "dropped" in lines[1][2]
    assert lines[2][1] == FAIL and "no cable address: route 10.77.1.0/24" in lines[2][2]


def test_node_lines_name_the_family_and_what_listens() -> None:
    lines = judge.node_lines(
        [
            NodeProbe("n2", "fde0::1", Outcome(seconds=0.0002), 6698),
            NodeProbe("n2", "10.77.1.2", Outcome(errno=errno.ECONNREFUSED), 6699),
        ]
    )
    assert lines[0][:2] == ("node n2 IPv6", OK)
    assert lines[1][:2] == ("node n2 IPv4", FAIL) and "bench responder" in lines[1][3]


LINUX_ROUTE = "10.77.3.4 via inet6 fe80::1 dev v1x2 table 96 src 10.77.1.1 uid 0 \n    cache \n"
MAC_ROUTE = """   route to: 10.77.3.4
destination: 10.77.3.4
    gateway: 10.77.200.5
  interface: en5
      flags: <UP,GATEWAY,HOST,DONE,PROTO2>
"""


def test_route_device_reads_both_platforms() -> None:
    assert judge.route_device("linux", LINUX_ROUTE) == "v1x2"
    assert judge.route_device("macos", MAC_ROUTE) == "en5"
    assert judge.route_device("linux", "RTNETLINK answers: Network is unreachable") is None


def test_routes_are_named_by_cable_and_a_foreign_one_fails() -> None:
    cables = {"v1x2": "v1x2 to n2"}
    lines = judge.route_lines(
        [
            RouteSeen("n2", "10.77.3.4", "v1x2"),
            RouteSeen("n3", "10.77.3.5", "tailscale0"),
            RouteSeen("n4", "10.77.3.6", None, "Network is unreachable"),
        ],
        cables,
        "lo",
    )
    assert lines[0] == ("route n2 IPv4", OK, "10.77.3.4 over cable v1x2 to n2", "")
    assert lines[1][1] == FAIL and "leaves by tailscale0 (Tailscale)" in lines[1][2]
    assert lines[2][1] == FAIL and "Network is unreachable" in lines[2][2]


def test_overlaps_are_named_with_their_owner() -> None:
    entries = [
        entry("0.0.0.0/0", "eth0"),  # a default route never overlaps
        entry("192.168.1.0/24", "eth0"),
        entry("10.77.9.0/24", "utun4"),
        entry("10.77.8.0/24", "br-3f2a"),
        entry("10.77.133.248/31", "v1x2", kernel=True),  # a cable's own connected route
        entry("10.77.7.7/32", "wg0"),
        entry("fde0:20c6:1fa7:1::/64", "tailscale0"),
    ]
    ours = [ip_network("10.77.133.248/31")]
    found = judge.overlaps(PREFIX, entries, ours)
    assert [(o.entry.device, o.owner) for o in found] == [
        ("utun4", "a VPN (utun)"), ("br-3f2a", "a Docker network"), ("wg0", "WireGuard"),
        ("tailscale0", "Tailscale"),
    ]  # fmt: skip
    assert judge.owner(entry("100.100.1.0/24", "en0")) == "Tailscale"  # by its range
    assert judge.owner(entry("fd7a:115c:a1e0::/48", "utun9")) == "Tailscale"
    assert judge.owner(entry("10.77.1.0/24", "docker0")) == "Docker"
    assert judge.owner(entry("10.77.1.0/24", "en7")) == "something on en7"
    lines = judge.overlap_lines(found, PREFIX)
    assert (
        lines[0][1] == FAIL and "withdraws IPv4" in lines[0][2] and "--ipv4-prefix" in lines[0][3]
    )
    assert "may go to it" in lines[-1][2]
    assert judge.overlap_lines([], PREFIX)[0][1] == OK
    assert judge.overlaps(None, entries, ours)[0].entry.network == IPv6Network(
        "fde0:20c6:1fa7:1::/64"
    )


IP_ROUTES_V4 = [
    {"dst": "10.77.1.99", "dev": "v1x2", "table": "96", "protocol": "babel"},
    {"dst": "10.77.133.248/31", "dev": "v1x2", "protocol": "kernel", "scope": "link"},
    {"type": "local", "dst": "10.77.72.11", "dev": "lo", "table": "local", "protocol": "kernel"},
    {"dst": "10.77.226.0/24", "dev": "tailscale0", "protocol": "boot"},
    {"dst": "default", "dev": "eth0", "protocol": "dhcp"},
]
IP_ADDRS = [
    {"ifname": "lo", "addr_info": [{"local": "10.77.72.11", "prefixlen": 32}]},
    {"ifname": "v1x2", "addr_info": [{"local": "10.77.133.248", "prefixlen": 31}]},
]


def fake_run(argv: Sequence[str]) -> str:
    if argv[:2] == ["ip", "-json"] and "route" in argv:
        return json.dumps(IP_ROUTES_V4 if "-4" in argv else [])
    if argv[:2] == ["ip", "-json"]:
        return json.dumps(IP_ADDRS)
    raise OSError(f"not in this test: {argv}")


RAW = {
    "node_id": "aaaaaaaaaaaa",
    "ipv4_prefix": "10.77.0.0/16",
    "interfaces": [{"name": "v1x2"}],
    "neighbours": [{"interface": "v1x2", "node_id": "bbbbbbbbbbbb"}],
    "addresses_v4": [{"interface": "v1x2", "address": "10.77.133.248", "peer": "10.77.133.249"}],
    "nodes": [{"node_id": "bbbbbbbbbbbb", "name": "n2", "node_address": "fde0::2"}],
}


def test_the_host_overlaps_leave_the_mesh_own_out() -> None:
    found = acting.host_overlaps(RAW, fake_run, LINUX)
    assert [o.entry.what for o in found] == ["route 10.77.226.0/24 dev tailscale0"]


def test_on_a_mac_its_own_mesh_routes_are_no_overlap_and_a_utun_is_named() -> None:
    """The Mac of test_darwin's NETSTAT_INET_MESH: node address 10.77.44.9 on lo0, a cable
    10.77.200.4/31 on en4; a VPN's route on utun3 over the prefix."""
    mac = RAW | {
        "node_address_v4": "10.77.44.9",
        "interfaces": [{"name": "en4"}],
        "addresses_v4": [{"interface": "en4", "address": "10.77.200.4", "peer": "10.77.200.5"}],
    }
    vpn = "10.77.9.0/24       link#17            UCS                 utun3      !\n"

    def netstat(text: str) -> acting.Run:
        return lambda argv: text if list(argv) == ["netstat", "-rn", "-f", "inet"] else ""

    assert acting.host_overlaps(mac, netstat(NETSTAT_INET_MESH), MACOS) == []
    found = acting.host_overlaps(mac, netstat(NETSTAT_INET_MESH + vpn), MACOS)
    assert [(o.entry.what, o.owner) for o in found] == [
        ("route 10.77.9.0/24 via link#17", "a VPN (utun)")
    ]


def test_the_probe_stops_at_the_first_layer_that_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    tried: list[str] = []

    def cables(raw: object, port: int) -> list[CableProbe]:
        tried.append("cables")
        return [CableProbe("v1x2", "n2", "10.77.133.248", "10.77.133.249", Outcome(timed_out=True))]

    def nodes(*args: object) -> list[NodeProbe]:
        tried.append("nodes")
        return []

    monkeypatch.setattr(acting, "cable_probes", cables)
    monkeypatch.setattr(acting, "node_probes", nodes)
    lines = acting.probe(RAW, fake_run, LINUX)
    assert tried == ["cables"]
    names = [line[0] for line in lines]
    assert names == ["cable v1x2", "overlaps", "probe"]  # the overlap: the likely cause
    assert lines[-1][2] == "stopped at cables: not probed: node addresses, routes"


def test_a_node_that_is_not_reachable_is_named_not_probed(monkeypatch: pytest.MonkeyPatch) -> None:
    n2 = {"node_id": "bbbbbbbbbbbb", "name": "n2", "node_address": "fde0::2", "reachable": True}
    n3 = n2 | {"node_id": "cccccccccccc", "name": "n3", "node_address": "fde0::3"}
    raw = RAW | {"nodes": [n2, n3 | {"reachable": False}]}
    tried: list[str] = []

    def reach(address: str, port: int) -> Outcome:
        tried.append(address)
        return Outcome(seconds=0.001)

    fine = [CableProbe("v1x2", "n2", "10.77.133.248", "10.77.133.249", Outcome(seconds=0.01))]
    monkeypatch.setattr(acting, "cable_probes", lambda raw, port: fine)
    monkeypatch.setattr(acting, "reach", reach)
    lines = acting.probe(raw, fake_run, LINUX)
    assert tried == ["fde0::2"]
    named = [line for line in lines if line[0] == "node n3"]
    assert named == [("node n3", WARN, "not reachable (no route to it in the mesh): not probed",
                   "babblerctl nodes says since when; its cables and its babblerd")]  # fmt: skip
    assert not any(line[2].startswith("stopped at node addresses") for line in lines), lines


def test_a_refused_connect_on_loopback_is_refused_at_once() -> None:
    outcome = acting.reach("127.0.0.1", 9, timeout=2.0)  # discard: nobody listens here
    assert outcome.errno == errno.ECONNREFUSED and not outcome.timed_out


@contextlib.contextmanager
def far_end(act: Callable[[socket.socket], None]) -> Iterator[int]:
    """A fake bench responder on loopback that does `act` with each connection; its port."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(10)

    def serve() -> None:
        with contextlib.suppress(OSError):
            conn, _ = server.accept()
            with conn:
                act(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        server.close()
        thread.join(10)


def test_a_probe_is_bounded_by_its_timeout_once_connected() -> None:
    def drip(conn: socket.socket) -> None:  # a byte every 0.2 s, never a whole line, 5 s
        for _ in range(25):
            conn.sendall(b"x")
            time.sleep(0.2)

    with far_end(drip) as port:
        start = time.monotonic()
        outcome = acting.transfer("127.0.0.1", "127.0.0.1", port, timeout=1.0)
        took = time.monotonic() - start
        assert outcome.timed_out and outcome.stage == "transfer", outcome
        assert took < 1.5, took
        assert judge.cause(outcome, port, "its bench responder")[1].startswith("dropped")


def test_a_far_end_that_closes_mid_transfer_is_named_as_such() -> None:
    def close(conn: socket.socket) -> None:
        conn.recv(100)

    with far_end(close) as port:
        outcome = acting.transfer("127.0.0.1", "127.0.0.1", port, timeout=2.0)
        status, said, _ = judge.cause(outcome, port, "its bench responder")
        assert (status, said) == (FAIL, "the far end closed or reset the connection"), outcome


def test_a_command_that_hangs_is_a_one_line_error_within_the_probe_bound() -> None:
    start = time.monotonic()
    with pytest.raises(OSError, match=r"^sleep did not finish within 0.3 s$"):
        run_command(["sleep", "5"], timeout=0.3)
    assert time.monotonic() - start < 2
    hung = acting.routes_seen(RAW, lambda argv: run_command(["sleep", "5"], 0.3), LINUX)
    assert [(r.address, r.error) for r in hung] == [
        ("fde0::2", "sleep did not finish within 0.3 s")
    ]


def test_the_bundle_holds_its_files_and_never_a_key(tmp_path: Path) -> None:
    key = "0123456789abcdef" * 4
    log = tmp_path / "babblerd.log"
    log.write_text("".join(f"line {i}\n" for i in range(600)) + f"oops {key}\n")
    status = typed({"version": "0.1.0", "mesh": "running", "nodes": [{"name": "n2"}]})
    facts = Facts("Linux", True, "/run/babbler/babblerd.sock", status)
    out = tmp_path / "b.tar.gz"
    said = bundle.write_bundle(out, facts, [Check("x", OK, "fine")], tmp_path, log, fake_run)
    assert said.endswith(f"(log from {log})"), said
    assert out.stat().st_mode & 0o777 == 0o600
    with tarfile.open(out) as tar:
        files = {Path(m.name).name: tar.extractfile(m).read() for m in tar.getmembers()}  # type: ignore[union-attr]
    assert [n["name"] for n in json.loads(files["nodes.json"])] == ["n2"]
    assert json.loads(files["doctor.json"]) == [
        {"check": "x", "status": OK, "saw": "fine", "do": ""}
    ]
    lines = files["log.txt"].decode().splitlines()
    assert len(lines) == bundle.LOG_LINES and lines[0] == "line 101"
    assert all(key.encode() not in data for data in files.values())
    assert lines[-1] == f"oops {bundle.HIDDEN}"


def test_a_bundle_written_over_an_old_file_is_0600_too(tmp_path: Path) -> None:
    out = tmp_path / "b.tar.gz"
    out.write_text("an older bundle")
    out.chmod(0o644)
    facts = Facts("Linux", True, "/run/babbler/babblerd.sock", typed({"mesh": "running"}))
    log = tmp_path / "babblerd.log"
    log.write_text("one line\n")
    said = bundle.write_bundle(out, facts, [], tmp_path, log, fake_run)
    assert out.stat().st_mode & 0o777 == 0o600 and said.endswith(f"(log from {log})")
    with tarfile.open(out) as tar:
        assert len(tar.getmembers()) == 7
