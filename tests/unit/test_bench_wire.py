"""The bench's pure parts: requests and their limits, percentiles, and the reports."""

from __future__ import annotations

import json
import sys
import types
import xml.etree.ElementTree as ET
from ipaddress import IPv4Network

import pytest

from babbler.bench import report, wire
from babbler.bench.report import NodeResult
from babbler.bench.wire import Rate


def test_a_request_round_trips_through_its_line() -> None:
    request = wire.Request("ring", seconds=2.5, to="fde0:20c6:1fa7:ffff::", token="ab12")
    assert wire.parse(request.line().rstrip(b"\n")) == request
    sized = wire.Request("send", nbytes=1 << 30)
    assert json.loads(sized.line()) == {"test": "send", "bytes": 1 << 30}
    assert wire.parse(sized.line()) == sized


@pytest.mark.parametrize(
    ("line", "says"),
    [
        (b"hello", "not a JSON line"),
        (b"[1]", "not a JSON object"),
        (b'{"test": "flood"}', "test must be one of"),
        (b'{"test": "rtt", "size": 64}', "rtt needs size and count"),
        (b'{"test": "rtt", "size": 100000, "count": 1}', "size must be"),
        (b'{"test": "recv"}', "recv needs bytes or seconds"),
        (b'{"test": "recv", "seconds": 3600}', "seconds must be from 0 to 60"),
        (b'{"test": "recv", "seconds": true}', "seconds must be a number"),
        (b'{"test": "send", "bytes": -1}', "bytes must be"),
        (b'{"test": "ring", "to": "fde0:20c6:1fa7::1", "seconds": 1}', "ring needs"),
        (b'{"test": "ring", "to": "2001:db8::1", "seconds": 1, "token": "x"}', "mesh address"),
        (b'{"test": "ring", "to": "example.com", "seconds": 1, "token": "x"}', "a mesh address"),
        (b'{"test": "send", "token": 7}', "token must be"),
    ],
)
def test_bad_requests_are_refused_with_the_reason(line: bytes, says: str) -> None:
    with pytest.raises(wire.BadBenchRequest, match=says):
        wire.parse(line)


def test_percentiles_by_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert wire.percentile(values, 50) == 50 and wire.percentile(values, 99) == 99
    assert wire.percentile([3.0], 99) == 3.0
    assert wire.percentile(list(reversed(values)), 100) == 100


def test_the_sweep_is_1_kib_to_1_gib_by_fours() -> None:
    assert wire.SWEEP[0] == 1024 and wire.SWEEP[-1] == 1 << 30 and len(wire.SWEEP) == 11


def sample() -> NodeResult:
    result = NodeResult("n2", "aaaabbbbcccc", "fde0:20c6:1fa7:ffff:aaaa:bbbb:cccc:0", 1)
    result.rtts = [0.0001] * 98 + [0.001] * 2  # p99: the 99th of 100
    result.sent = Rate(10 * 10**9 // 8, 1.0)  # 10 Gbit/s
    result.received = Rate(5 * 10**9 // 8, 1.0)
    result.sweep = [(1024, 0.0001), (1 << 30, 0.5)]
    return result


def test_one_nodes_report_reads_like_the_mlx_bandwidth_benchs_table() -> None:
    lines = report.one("n1", sample())
    assert lines[0] == "bench n1 -> n2 (fde0:20c6:1fa7:ffff:aaaa:bbbb:cccc:0, 1 hop)"
    assert "p50 0.100 ms  p99 1.000 ms" in lines[1]
    assert "10.00 Gbit/s  (n1 -> n2)" in lines[2] and "5.00 Gbit/s  (n2 -> n1)" in lines[3]
    assert lines[-2].split() == ["1", "KiB", "0.100", "ms", "0.082"]  # Gbit/s, as send and receive
    assert lines[-1].split() == ["1", "GiB", "500.000", "ms", "17.180"]


def test_every_node_in_one_table_and_failures_said() -> None:
    failed = NodeResult("n3", "c" * 12, "fde0:20c6:1fa7:ffff::", 2, error="busy")
    lines = report.every("n1", [sample(), failed])
    assert lines[2].split() == ["n2", "1", "0.100", "1.000", "10.00", "5.00"]
    assert lines[3].split()[:3] == ["n3", "2", "failed:"]
    slow = sample()
    slow.name, slow.sent, slow.received = "n4", Rate(10**8 // 8, 1.0), Rate(10**8 // 8, 1.0)
    assert report.every("n1", [sample(), slow])[-1].endswith("link (under half the best rate): n4")
    assert not report.every("n1", [sample()])[-1].startswith("  behind")
    as_json = sample().to_json()
    assert as_json["send"]["gbit_s"] == pytest.approx(10.0)
    assert as_json["sweep"][1]["gbyte_s"] == pytest.approx(2.147, abs=0.001)
    assert as_json["sweep"][1]["gbit_s"] == pytest.approx(17.180, abs=0.001)


def test_the_ring_names_the_slowest_link() -> None:
    lines = report.ring(["n1", "n2", "n3"], [Rate(10**9, 1.0), Rate(10**8, 1.0), "busy"], 1.0)
    assert lines[1].split() == ["n1", "->", "n2", "8.00", "Gbit/s"]
    assert lines[3].split()[:4] == ["n3", "->", "n1", "failed:"]
    assert lines[-1] == "  slowest 0.80 Gbit/s (n2 -> n3), sum 8.80 Gbit/s"


def test_the_ring_s_json_and_picture_name_the_slowest_and_the_sum() -> None:
    names = ["n1", "n2", "n3"]
    rates: list[Rate | str] = [Rate(10**9, 1.0), Rate(10**8, 1.0), "busy"]
    found = report.ring_json("n1", names, rates)
    assert found["slowest"] == {"from": "n2", "to": "n3", "gbit_s": pytest.approx(0.8)}
    assert found["sum_gbit_s"] == pytest.approx(8.8)
    assert found["ring"][2] == {"from": "n3", "to": "n1", "error": "busy"}
    assert report.ring_json("n1", ["n1", "n2"], ["busy", "busy"])["slowest"] is None
    root = ET.fromstring(report.ring_svg("n1", names, rates, 3.0))
    ns = "{http://www.w3.org/2000/svg}"
    texts = [t.text or "" for t in root.findall(f"{ns}text")]
    assert "slowest 0.80 Gbit/s (n2 -> n3), sum 8.80 Gbit/s" in texts
    assert "failed: busy" in texts
    bars = root.findall(f"{ns}rect")
    assert [bar.get("fill") for bar in bars] == ["#1f77b4", "#d62728"]  # the slowest red


def test_the_pictures_axes_are_marked_at_round_values() -> None:
    assert report.ticks(9.95) == [0, 2, 4, 6, 8, 10]
    assert report.ticks(19.9) == [0, 5, 10, 15, 20]
    assert report.ticks(0.94) == [0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert report.ticks(31) == [0, 10, 20, 30, 40]
    ns = "{http://www.w3.org/2000/svg}"
    root = ET.fromstring(report.svg("n1", [sample()]))  # its peak: 17.18 Gbit/s
    marks = [t.text for t in root.findall(f"{ns}text") if t.get("text-anchor") == "end"]
    assert marks == ["0", "5", "10", "15", "20"]


def test_the_picture_is_an_svg_with_a_line_per_node() -> None:
    other = sample()
    other.name = "n3 <slow>"
    root = ET.fromstring(report.svg("n1", [sample(), other]))
    ns = "{http://www.w3.org/2000/svg}"
    assert root.tag == f"{ns}svg"
    assert len(root.findall(f"{ns}polyline")) == 2
    assert "n3 <slow>" in [t.text for t in root.findall(f"{ns}text")]


def test_mesh_sources_are_the_ipv6_prefix_and_the_ipv4_one_when_given() -> None:
    prefix = IPv4Network("10.77.0.0/16")
    assert wire.mesh_source("fde0:20c6:1fa7:ffff::1") and not wire.mesh_source("fe80::1%v1")
    assert wire.mesh_source("10.77.3.4", prefix) and not wire.mesh_source("10.77.3.4")
    assert not wire.mesh_source("10.78.0.1", prefix) and not wire.mesh_source("nonsense", prefix)
    ring = b'{"test": "ring", "to": "10.77.3.4", "seconds": 1, "token": "t"}'
    assert wire.parse(ring, prefix).to == "10.77.3.4"
    with pytest.raises(wire.BadBenchRequest, match="mesh address"):
        wire.parse(ring)


def test_the_progress_bar_redraws_ten_times_a_second_at_most(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from babbler.bench.cli import Bar

    now = [0.0]
    bar = Bar(True, clock=lambda: now[0])
    show = bar.step("n2 throughput")
    for i in range(100_000):  # a call per chunk over 10 s
        now[0] = i / 10_000
        show(i / 100_000)
    show(1.0)
    assert bar.redraws <= 10 * 10 + 2, bar.redraws
    assert capsys.readouterr().err.endswith("100%")


def test_an_address_entry_without_an_address_does_not_spoil_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """local_ipv4, read by serve_cables each second: one entry without "addr" (netifaces)
    or without IFA_LOCAL/IFA_ADDRESS (netlink) was "None", and IPv4Address("None") stopped
    the responder picking up new cable addresses for good."""
    from babbler.bench import responder

    faked = types.ModuleType("netifaces")
    table = {"lo0": [{"addr": "127.0.0.1"}], "en4": [{"peer": "x"}, {"addr": "10.77.200.4"}]}
    faked.AF_INET = 2  # type: ignore[attr-defined]
    faked.interfaces = lambda: list(table)  # type: ignore[attr-defined]
    faked.ifaddresses = lambda name: {2: table[name]}  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pyroute2", None)  # macOS: no pyroute2, netifaces
    monkeypatch.setitem(sys.modules, "netifaces", faked)
    assert responder.local_ipv4() == {"127.0.0.1", "10.77.200.4"}
    assert responder.ipv4_only([None, "None", "10.77.200.6", 7, "fde0::1"]) == {"10.77.200.6"}
