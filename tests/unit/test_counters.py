# ruff: noqa: E501  (netstat's rows are as wide as a Mac prints them)
"""Link counters (issue 34 item 1): `netstat -ibn` read as a Mac prints it, the macOS lab's
`netstat -ibn` read back, sysfs's files, the reading's reuse, `status` showing counters
without a `watch` event for them, and the checker of another node's `counters` answer."""

from __future__ import annotations

import contextlib
import json
import re
from ipaddress import IPv4Address, IPv6Address
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from babbler import client
from babbler.core import views
from babbler.core.darwin_output import link_counters
from babbler.core.errors import KernelError
from babbler.core.platform import LINUX, MACOS
from babbler.daemon.counters import REUSE, CountersReader
from babbler.daemon.nodes.answer import ANSWER_CAP, encode_counters
from babbler.daemon.nodes.checked import MAX_ITEMS, BadInfo, parse_counters
from babbler.daemon.requests import help_lines
from babbler.host import sysfs
from babbler.lab.macos.output import Address, Counters, Iface, interface_table
from tests.unit.samples import STATUS, facts

# `netstat -ibn` as a Mac prints it (typed in its format, values made up): lo0 without a MAC,
# a down interface (`*`), a long IPv6 address cut to its column, numbers wider than theirs.
MAC_NETSTAT = """\
Name       Mtu   Network       Address            Ipkts Ierrs     Ibytes    Opkts Oerrs     Obytes  Coll
lo0        16384 <Link#1>                          8812     0    1203344     8812     0    1203344     0
lo0        16384 127           127.0.0.1           8812     -    1203344     8812     -    1203344     -
lo0        16384 ::1/128     ::1                   8812     -    1203344     8812     -    1203344     -
gif0*      1280  <Link#2>                             0     0          0        0     0          0     0
en0        1500  <Link#6>    3c:22:fb:10:20:30  91520331     0 120443211009 40211877     0 9923314456     0
en0        1500  fe80::1c5d: fe80:6::1c5d:8a9f 91520331     - 120443211009 40211877     - 9923314456     -
en0        1500  192.168.1     192.168.1.23    91520331     - 120443211009 40211877     - 9923314456     -
en2        9000  <Link#12>   36:4c:11:00:00:02      120     0      15360      118     0      15104     0
"""


def test_netstat_ibn_as_a_mac_prints_it_gives_each_links_own_row() -> None:
    assert link_counters(MAC_NETSTAT) == {
        "lo0": {"rx_packets": 8812, "rx_bytes": 1203344, "tx_packets": 8812, "tx_bytes": 1203344},
        "gif0": {"rx_packets": 0, "rx_bytes": 0, "tx_packets": 0, "tx_bytes": 0},
        "en0": {
            "rx_packets": 91520331,
            "rx_bytes": 120443211009,
            "tx_packets": 40211877,
            "tx_bytes": 9923314456,
        },
        "en2": {"rx_packets": 120, "rx_bytes": 15360, "tx_packets": 118, "tx_bytes": 15104},
    }


@pytest.mark.parametrize(
    "text",
    [
        "",
        "netstat: illegal option -- x\n",
        MAC_NETSTAT.splitlines()[1] + "\n",  # no header: no columns to read by
        MAC_NETSTAT.splitlines()[0] + "\nen2 9000 <Link#12> 36:4c:11:00:00:02 1 0 -5 1 0 1 0\n",
        MAC_NETSTAT.splitlines()[0] + "\nen2 9000 <Link#12> 1 0 2 3\n",  # too few numbers
        MAC_NETSTAT.splitlines()[0] + "\nen2 9000 <Link#12> aa 1 0 1_0 1 0 1 0\n",
        MAC_NETSTAT.splitlines()[0] + "\nen2 9000 <Link#12> aa 1 0 ² 1 0 1 0\n",
    ],
)
def test_netstat_ibn_that_does_not_read_as_counters_gives_none(text: str) -> None:
    assert link_counters(text) == {}


NAMES = st.from_regex(r"(en|bridge|utun|anpi)[0-9]{1,2}", fullmatch=True)
COUNT = st.integers(0, 2**64 - 1)
IPV6 = st.integers(0, 2**128 - 1).map(IPv6Address)
IPV4 = st.integers(0, 2**32 - 1).map(IPv4Address)


@st.composite
def macs(draw: st.DrawFn) -> tuple[list[Iface], dict[str, Counters]]:
    """Interfaces of a Mac (lo0 and some others, up or down, with addresses of both
    families) and their counters."""
    names = ["lo0", *draw(st.lists(NAMES, max_size=6, unique=True))]
    ifaces, counted = [], {}
    for index, name in enumerate(names, start=1):
        addresses = draw(
            st.lists(
                st.one_of(
                    st.builds(Address, IPV6, st.integers(64, 128)),
                    st.builds(Address, IPV4, st.integers(8, 32)),
                ),
                max_size=3,
            )
        )
        ifaces.append(
            Iface(
                name,
                index,
                up=draw(st.booleans()),
                carrier=True,
                mtu=draw(st.sampled_from([1500, 9000, 16384])),
                mac=None if name == "lo0" else f"36:4c:11:00:00:{index:02x}",
                kind="loopback" if name == "lo0" else "ether",
                addresses=tuple(addresses),
            )
        )
        counted[name] = draw(st.builds(Counters, COUNT, COUNT, COUNT, COUNT))
    return ifaces, counted


@given(macs())
def test_the_labs_netstat_ibn_reads_back_to_the_counters_it_was_made_of(
    mac: tuple[list[Iface], dict[str, Counters]],
) -> None:
    ifaces, counted = mac
    read = link_counters(interface_table(ifaces, counted))
    assert read == {
        name: {
            "rx_bytes": c.rx_bytes,
            "tx_bytes": c.tx_bytes,
            "rx_packets": c.rx_packets,
            "tx_packets": c.tx_packets,
        }
        for name, c in counted.items()
    }


@given(st.text(max_size=400))
def test_netstat_ibn_parser_never_fails_on_any_text(text: str) -> None:
    for found in link_counters(text).values():
        assert set(found) == {"rx_bytes", "tx_bytes", "rx_packets", "tx_packets"}
        assert all(isinstance(v, int) and v >= 0 for v in found.values())


# The header as pastes from Macs show it, character for character (gopsutil's capture, tools'
# test data from recent macOS): the lab's rows must line up under it as a Mac's do.
MAC_HEADER = (
    "Name       Mtu   Network       Address            Ipkts Ierrs     Ibytes    Opkts Oerrs"
    "     Obytes  Coll"
)


def _right_edges(line: str) -> list[int]:
    return [m.end() for m in re.finditer(r"\S+", line)][-7:]


def test_the_labs_netstat_ibn_is_laid_out_as_a_macs() -> None:
    lo0 = Iface(
        "lo0",
        1,
        True,
        True,
        16384,
        kind="loopback",
        addresses=(Address(IPv4Address("127.0.0.1"), 8), Address(IPv6Address("::1"), 128)),
    )
    en2 = Iface(
        "en2",
        12,
        False,
        True,
        9000,
        mac="36:4c:11:00:00:02",
        addresses=(
            Address(IPv6Address("fe80::1c5d:8a9f:0:1"), 64),
            Address(IPv4Address("10.77.128.1"), 31),
        ),
    )
    text = interface_table([en2, lo0], {"en2": Counters(15360, 15104, 120, 118)})
    lines = text.splitlines()
    assert lines[0] == MAC_HEADER
    assert all(_right_edges(line) == _right_edges(MAC_HEADER) for line in lines), text
    assert lines[1].split() == ["lo0", "16384", "<Link#1>", "0", "0", "0", "0", "0", "0", "0"]
    assert lines[2].split()[:3] == ["lo0", "16384", "127"]
    assert lines[3].split()[2:4] == ["::1/128", "::1"]
    assert lines[4].split() == [
        "en2*", "9000", "<Link#12>", "36:4c:11:00:00:02", "120", "0", "15360", "118", "0", "15104", "0",
    ]  # fmt: skip
    # IPv6: the address with its zone, cut to 11; the kernel's embedded scope, cut to 17
    assert lines[5].split()[2:4] == ["fe80::1c5d:", "fe80:c::1c5d:8a9f"]
    assert lines[5].split()[4:] == ["120", "-", "15360", "118", "-", "15104", "-"]
    assert lines[6].split()[2:4] == ["10.77.128/31", "10.77.128.1"]  # IPv4: 13 and 15


def test_sysfs_counters_are_the_links_statistics_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stats = tmp_path / "v1x2" / "statistics"
    stats.mkdir(parents=True)
    for name, value in (("rx_bytes", 10), ("tx_bytes", 20), ("rx_packets", 1), ("tx_packets", 2)):
        (stats / name).write_text(f"{value}\n")
    monkeypatch.setattr(sysfs, "SYSFS_NET", tmp_path)
    assert sysfs.read_counters("v1x2") == {
        "rx_bytes": 10,
        "tx_bytes": 20,
        "rx_packets": 1,
        "tx_packets": 2,
    }
    assert sysfs.read_counters("gone") is None
    (stats / "tx_packets").write_text("garbage\n")
    assert sysfs.read_counters("v1x2") is None


async def test_a_macos_reading_runs_netstat_once_per_reuse_and_survives_its_failure(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ran: list[tuple[str, ...]] = []
    fail = False

    async def run(args: Any) -> str:
        ran.append(tuple(args))
        if fail:
            raise KernelError("netstat: no answer in 5 s", 0)
        return MAC_NETSTAT

    reader = CountersReader(MACOS, run, clock=trio.current_time)
    first = await reader.read(["en2", "en9"])
    assert ran == [("netstat", "-ibn")]
    assert first.links == {
        "en2": {"rx_packets": 120, "rx_bytes": 15360, "tx_packets": 118, "tx_bytes": 15104},
        "en9": None,  # no such link: null, not a guess
    }
    assert first.interfaces() == [{"name": "en2", **first.links["en2"]}]  # type: ignore[dict-item]
    assert await reader.read(["en2", "en9"]) is first  # within REUSE: the same reading
    await trio.sleep(REUSE)
    fail = True
    later = await reader.read(["en2", "en9"])
    assert len(ran) == 2 and later.links == {"en2": None, "en9": None} and later.at > first.at


async def test_a_linux_reading_reads_sysfs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sysfs, "SYSFS_NET", tmp_path)
    reading = await CountersReader(LINUX).read(["v1x2"])
    assert reading.links == {"v1x2": None} and reading.at > 0


def test_status_shows_counters_and_watch_is_not_told_they_moved() -> None:
    before = facts(counters={"v1x2": {"rx_bytes": 1, "tx_bytes": 2, "rx_packets": 3, "tx_packets": 4}}, counters_at=5.0)  # fmt: skip
    after = facts(counters={"v1x2": {"rx_bytes": 9, "tx_bytes": 9, "rx_packets": 9, "tx_packets": 9}}, counters_at=6.0)  # fmt: skip
    status = views.status(before)
    assert status["counters_at"] == 5.0
    assert [i["counters"] for i in status["interfaces"]] == [
        {"rx_bytes": 1, "tx_bytes": 2, "rx_packets": 3, "tx_packets": 4}
    ]
    assert views.node_events(views.node_view(before), views.node_view(after)) == []
    unread = views.status(facts())
    assert unread["counters_at"] is None
    assert [i["counters"] for i in unread["interfaces"]] == [None]


def test_help_lists_counters() -> None:
    assert any(line.startswith("counters: ") for line in help_lines())


# -- another node's `counters` answer, checked -------------------------------------------------

NODE = "0000aaaa0001"
GOOD: dict[str, Any] = {
    "node_id": NODE,
    "at": 812.5,
    "interfaces": [
        {"name": "v1x2", "rx_bytes": 1, "tx_bytes": 2, "rx_packets": 3, "tx_packets": 4},
        {"name": "en2", "rx_bytes": 2**64 - 1, "tx_bytes": 0, "rx_packets": 0, "tx_packets": 0},
    ],
}


def line(value: object) -> bytes:
    return (json.dumps(value) + "\n").encode()


def with_link(**changes: object) -> dict[str, Any]:
    link = {**GOOD["interfaces"][0], **changes}
    return {**GOOD, "interfaces": [{k: v for k, v in link.items() if v is not ...}]}


def test_a_good_counters_answer_is_taken_unknown_keys_dropped() -> None:
    sent = {**GOOD, "later": {"x": 1}, "interfaces": [{**GOOD["interfaces"][0], "drops": 5}]}
    assert parse_counters(line(sent), NODE) == {
        "node_id": NODE,
        "at": 812.5,
        "interfaces": [GOOD["interfaces"][0]],
    }
    assert parse_counters(encode_counters(GOOD), NODE) == GOOD


@pytest.mark.parametrize(
    ("sent", "said"),
    [
        ({**GOOD, "node_id": "0000aaaa0002"}, "node_id: not the node asked"),
        ({**GOOD, "node_id": None}, "node_id: expected 12 lowercase hex digits"),
        ({**GOOD, "at": -1}, "at: -1 is out of range"),
        ({**GOOD, "at": "now"}, "at: expected a number"),
        ({k: v for k, v in GOOD.items() if k != "at"}, "at: missing"),
        ({k: v for k, v in GOOD.items() if k != "interfaces"}, "interfaces: missing"),
        ({**GOOD, "interfaces": {"v1x2": {}}}, "interfaces: expected a list"),
        (with_link(rx_bytes=-1), "interfaces[0].rx_bytes: -1 is out of range"),
        (with_link(tx_bytes=2**64), "interfaces[0].tx_bytes: 18446744073709551616 is out"),
        (with_link(rx_packets=1.5), "interfaces[0].rx_packets: expected an integer"),
        (with_link(tx_packets="4"), "interfaces[0].tx_packets: expected an integer"),
        (with_link(tx_packets=True), "interfaces[0].tx_packets: expected an integer"),
        (with_link(tx_packets=...), "interfaces[0].tx_packets: missing"),
        (with_link(name="a/b"), "interfaces[0].name: not an interface name"),
        (with_link(name="x" * 16), "interfaces[0].name: not an interface name"),
        (with_link(name="v1\x1b[2J"), "interfaces[0].name: control character"),
        (with_link(name=...), "interfaces[0].name: missing"),
        ({**GOOD, "interfaces": [GOOD["interfaces"][0]] * 2}, "a link listed twice"),
        (
            {
                **GOOD,
                "interfaces": [
                    {**GOOD["interfaces"][0], "name": f"l{i}"} for i in range(MAX_ITEMS + 1)
                ],
            },
            "longer than 16384 bytes",  # so many links never fit: the size cap refuses first
        ),
        ([GOOD], "the answer: expected an object"),
    ],
)
def test_a_hostile_counters_answer_is_refused_saying_what(sent: object, said: str) -> None:
    with pytest.raises(BadInfo) as refused:
        parse_counters(line(sent), NODE)
    assert said in str(refused.value)


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (b'{"node_id": "' + b"x" * ANSWER_CAP + b'"}\n', f"longer than {ANSWER_CAP} bytes"),
        (b"[" * 40 + b"]" * 40, "nested deeper than 16"),
        (line({**GOOD, "at": 1}).replace(b'"at": 1', b'"at": ' + b"9" * 30), "more than 20 digits"),
        (line(GOOD).replace(b"812.5", b"NaN"), "NaN is not a number"),
        (b"\xff\xfe", "not UTF-8"),
        (b"bad counters: asked too often\n", "not JSON"),
    ],
)
def test_counters_bytes_that_are_no_answer_are_refused_before_parsing(
    data: bytes, said: str
) -> None:
    with pytest.raises(BadInfo) as refused:
        parse_counters(data, NODE)
    assert said in str(refused.value)


@given(st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
def test_no_bytes_make_the_counters_checker_raise_anything_but_bad_info(data: bytes) -> None:
    with contextlib.suppress(BadInfo):
        parse_counters(data, NODE)


def test_an_answer_with_too_many_links_for_the_cap_is_cut_to_fit() -> None:
    many = {
        **GOOD,
        "interfaces": [
            {"name": f"l{i}", "rx_bytes": 2**63, "tx_bytes": 2**63, "rx_packets": 1, "tx_packets": 1}
            for i in range(400)
        ],
    }  # fmt: skip
    data = encode_counters(many)
    assert len(data) <= ANSWER_CAP
    taken = parse_counters(data, NODE)
    assert 0 < len(taken["interfaces"]) < 400


# -- the Python client ---------------------------------------------------------------------------


def test_the_client_types_counters_and_the_status_interfaces_counters() -> None:
    answer = {
        "at": 12.5,
        "nodes": [{"node_id": NODE, "at": 9.0, "age_s": 0.4, "interfaces": GOOD["interfaces"]}],
    }
    counted = client.parse_counters(json.dumps(answer))
    assert isinstance(counted, client.Counters) and counted.at == 12.5
    [node] = counted.nodes
    assert (node.node_id, node.at, node.age_s) == (NODE, 9.0, 0.4)
    assert node.interfaces[0] == client.LinkCounters("v1x2", 1, 2, 3, 4)
    status = client.parse_status(
        {
            **STATUS,
            "counters_at": 5.0,
            "interfaces": [{**STATUS["interfaces"][0], "counters": GOOD["interfaces"][0]}],
        }
    )
    assert status.counters_at == 5.0 and status.interfaces[0].counters == GOOD["interfaces"][0]
    assert client.parse_status(STATUS).counters_at is None  # an older babblerd's
