"""The macOS lab's commands (babbler/lab/macos/): what they print, babbler's own macOS parsers
read back to the facts they were made from; what they do not know, they refuse."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_network
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from babbler.core import darwin_output as parse
from babbler.core.ipv4 import DEFAULT_PREFIX, clash
from babbler.lab.macos import shims
from babbler.lab.macos.commands import USAGE, Answer, Rdma, answer
from babbler.lab.macos.output import Address, Bus, Counters, Iface, Port, Route
from babbler.lab.macos.server import open_server

TB_DEVICES = (("rdma_en2", "e0c5797d9c8fac05"), ("rdma_en3", "e1c5797d9c8fac05"))


@dataclass
class MemoryHost:
    """A Mac in memory: what the commands read, and a list of what they did."""

    links: list[Iface] = field(default_factory=list)
    table: list[Route] = field(default_factory=list)
    settings: dict[str, str] = field(default_factory=dict)
    done: list[tuple[object, ...]] = field(default_factory=list)
    mac: Rdma = field(default_factory=lambda: Rdma("26.2", "enabled", TB_DEVICES))

    counted: dict[str, Counters] = field(default_factory=dict)

    def ifaces(self) -> list[Iface]:
        return self.links

    def counters(self) -> dict[str, Counters]:
        return self.counted

    def routes(self, family: int) -> list[Route]:
        return [r for r in self.table if r.destination.version == family]

    def set_up(self, name: str, up: bool) -> None:
        self.done.append(("up", name, up))

    def set_service(self, port: str, on: bool) -> None:
        self.done.append(("service", port, on))

    def set_mtu(self, name: str, size: int) -> None:
        self.done.append(("mtu", name, size))

    def add_address(self, name: str, address: Address) -> None:
        self.done.append(("add", name, address))

    def remove_address(self, name: str, address: Address) -> None:
        self.done.append(("remove", name, address))

    def delete_route(self, route: Route) -> None:
        self.done.append(("route", route.destination))

    def bridge(self, bridge: str, member: str, join: bool) -> None:
        self.done.append(("bridge", bridge, member, join))

    def sysctl(self, name: str) -> str | None:
        return self.settings.get(name)

    def set_sysctl(self, name: str, value: str) -> None:
        self.settings[name] = value

    def ports(self) -> list[Port]:
        return [Port("Thunderbolt Bridge", "bridge0", "36:00:00:00:00:00")] + [
            Port(f"Thunderbolt {i + 1}", f"en{i + 2}", "36:00:00:00:00:01") for i in range(4)
        ]

    def buses(self) -> list[Bus]:
        ports = [link for link in self.links if link.name.startswith("en")]
        return [
            Bus(i + 1, 40, f"D-{i}", far="F-1" if link.carrier else None)
            for i, link in enumerate(ports)
        ]

    def machine(self) -> str:
        return "Mac n1"

    def rdma(self) -> Rdma:
        return self.mac


LO0 = Iface("lo0", 1, True, True, 16384, kind="loopback", addresses=(
    Address(IPv4Address("127.0.0.1"), 8),
    Address(IPv6Address("fe80::1"), 64),  # as the namespace lists them: not a Mac's order
    Address(IPv6Address("::1"), 128),
))  # fmt: skip


def run(host: MemoryHost, line: str) -> tuple[int, str]:
    """One command line, words split at spaces (a NUL stands for a space inside a word)."""
    program, *args = (word.replace("\0", " ") for word in line.split())
    result = answer(host, program, args)
    return result.code, result.out + result.err


ifaces = st.builds(
    lambda index, up, carrier, mtu, link_local, tentative, extra: Iface(
        f"en{index + 2}",
        index + 2,
        up,
        carrier,
        mtu,
        mac="36:1d:9a:00:00:01",
        addresses=(
            *(
                [Address(IPv6Address(f"fe80::{index + 1}"), 64, tentative=tentative)]
                if link_local
                else []
            ),
            *[Address(IPv6Address(f"fde0:20c6:1fa7:ffff::{index}:{n}"), 128) for n in range(extra)],
            Address(IPv4Address(f"10.77.{index}.2"), 31),
        ),
    ),
    st.integers(0, 5),
    st.booleans(),
    st.booleans(),
    st.sampled_from([1500, 9000]),
    st.booleans(),
    st.booleans(),
    st.integers(0, 2),
)


@given(st.lists(ifaces, max_size=4, unique_by=lambda i: i.name))
def test_ifconfig_reads_back_as_the_links_it_was_made_of(links: list[Iface]) -> None:
    host = MemoryHost([LO0, *links])
    assert parse.names(run(host, "ifconfig -l")[1]) == [i.name for i in host.links]
    up = parse.names(run(host, "ifconfig -l -u")[1])
    assert up == [i.name for i in host.links if i.up]
    states = parse.ifconfig_states(run(host, "ifconfig")[1])
    for link in links:
        state = states[link.name]
        assert state.up is link.up and state.mtu == link.mtu
        assert state.active is (link.up and link.carrier)
        assert state.link_local is any(
            a.address.is_link_local and not a.tentative for a in link.addresses
        )


def test_a_bridge_lists_its_members_as_a_mac_does() -> None:
    ports = [Iface(f"en{n}", n, True, False, 1500, member_of="bridge0") for n in (2, 3)]
    bridge = Iface("bridge0", 9, True, False, 1500, kind="bridge", members=("en2", "en3"))
    host = MemoryHost([LO0, *ports, bridge])
    code, text = run(host, "ifconfig bridge0")
    assert code == 0 and parse.bridge_members(text) == {"en2", "en3"}
    assert (
        "flags=8963<UP,BROADCAST,SMART,RUNNING,PROMISC,SIMPLEX,MULTICAST>"
        in run(host, "ifconfig en2")[1]
    )
    assert run(host, "ifconfig bridge0 deletem en3") == (0, "")
    assert host.done == [("bridge", "bridge0", "en3", False)]


routes = st.builds(
    Route,
    st.one_of(
        st.integers(0, 2**16 - 1).map(lambda n: ip_network(f"fde0:20c6:1fa7:ffff::{n:x}/128")),
        st.integers(0, 255).map(lambda n: ip_network(f"10.77.{n}.1/32")),
        st.integers(0, 255).map(lambda n: ip_network(f"10.{n}.0.0/16")),
        st.just(ip_network("192.168.1.0/24")),
    ),
    st.sampled_from(["en2", "en3"]),
    st.one_of(st.none(), st.just(IPv6Address("fe80::1")), st.just(IPv4Address("10.77.9.9"))),
    st.booleans(),
)


@given(st.lists(routes, max_size=8))
def test_netstat_reads_back_as_babelds_routes_and_the_hosts_own(table: list[Route]) -> None:
    # babeld installs host routes only (its filters: `ge 128`, `ge 32`)
    table = [
        r
        for r in table
        if (r.gateway is None or r.gateway.version == r.destination.version)
        and (not r.babel or r.destination.prefixlen == r.destination.max_prefixlen)
    ]
    host = MemoryHost([LO0], table)
    _, six = run(host, "netstat -rn -f inet6")
    _, four = run(host, "netstat -rn -f inet")
    assert six.startswith("Routing tables\n\nInternet6:\nDestination")
    assert sorted(parse.babel_routes(six)) == sorted(
        str(r.destination.network_address)
        for r in table
        if r.babel and isinstance(r.destination, IPv6Network)
    )
    assert sorted(IPv4Network(d, strict=False) for d in parse.babel_routes_v4(four)) == sorted(
        r.destination for r in table if r.babel and isinstance(r.destination, IPv4Network)
    )
    # the host's: its routes (but those inside a network one of its links reaches on the
    # link: that network's row stands for them) and lo0's addresses
    on_link = [(r.destination, r.interface) for r in table if r.gateway is None]
    assert sorted(h.network for h in parse.inet_routes(four)) == sorted(
        [
            r.destination
            for r in table
            if not r.babel
            and isinstance(r.destination, IPv4Network)
            and not any(
                r.destination != wider and r.destination.subnet_of(wider) and r.interface == on
                for wider, on in on_link
                if isinstance(wider, IPv4Network)
            )
        ]
        + [IPv4Network("127.0.0.0/8"), IPv4Network("127.0.0.1/32")]
    )


# A Mac in the mesh: lo0 with its node addresses, en2 cabled (its link-local, its cable
# addresses), en3 in bridge0; babeld's routes, a static one, the namespace's connected ones.
MESHED = MemoryHost(
    [
        Iface("lo0", 1, True, True, 16384, kind="loopback", addresses=(
            *LO0.addresses,
            Address(IPv4Address("10.77.44.9"), 32),
            Address(IPv6Address("fde0:20c6:1fa7:ffff:1:2:3:0"), 128),
        )),
        Iface("en2", 4, True, True, 9000, mac="36:d1:f2:0a:0b:01", addresses=(
            Address(IPv6Address("fde0:20c6:1fa7:ffff:1:2:3:4"), 128, deprecated=True),
            Address(IPv4Address("10.77.200.4"), 31),
            Address(IPv6Address("fe80::34d1:f2ff:fe0a:b01"), 64),
        )),
        Iface("en3", 5, True, False, 1500, mac="36:d1:f2:0a:0b:02", member_of="bridge0"),
        Iface("bridge0", 6, True, False, 1500, mac="36:d1:f2:0a:0b:02", kind="bridge",
              members=("en3",)),
    ],
    [
        Route(ip_network("10.77.200.4/31"), "en2"),
        Route(ip_network("10.77.31.8/32"), "en2", IPv4Address("10.77.200.5"), babel=True),
        Route(ip_network("192.168.7.0/24"), "en2", IPv4Address("10.77.200.5")),
        Route(ip_network("fe80::/64"), "en2"),
        Route(ip_network("fe80::/64"), "lo0"),
        Route(ip_network("fde0:20c6:1fa7:ffff:5:6:7:0/128"), "en2", IPv6Address("fe80::99"), True),
        Route(ip_network("fd00:1::/64"), "en2", IPv6Address("fe80::99"), babel=True),
        Route(ip_network("2001:db8::/48"), "en2", IPv6Address("fe80::99")),
    ],
)  # fmt: skip


def test_netstat_lists_routes_and_the_macs_own_addresses_as_a_mac_does() -> None:
    """In the routing table's order: own IPv4 addresses as an interface-scoped /32 (`UCS`,
    `!`), lo0's as host routes to themselves; own IPv6 addresses on lo0 (`UHL`, link-locals
    `UHLI`) with the interface's MAC as gateway; RTF_PRCLONING (`c`) on every route neither
    a host route nor cloning; link-local networks scoped (`I`). docs/macos.md, "Where the
    formats come from", says where each comes from."""
    assert run(MESHED, "netstat -rn -f inet") == (0, (
        "Routing tables\n\nInternet:\n"
        "Destination        Gateway            Flags               Netif Expire\n"
        "10.77.31.8         10.77.200.5        UGH2                  en2       \n"
        "10.77.44.9         10.77.44.9         UH                    lo0       \n"
        "10.77.200.4/31     link#4             UC                    en2       \n"
        "10.77.200.4/32     link#4             UCS                   en2      !\n"
        "127                127.0.0.1          UCS                   lo0       \n"
        "127.0.0.1          127.0.0.1          UH                    lo0       \n"
        "192.168.7          10.77.200.5        UGSc                  en2       \n"
    ))  # fmt: skip
    code, six = run(MESHED, "netstat -rn -f inet6")
    lines = six.splitlines()
    assert code == 0 and lines[:3] == ["Routing tables", "", "Internet6:"]
    assert {len(line) for line in lines[3:]} == {39 + 1 + 39 + 1 + 10 + 1 + 14 + 1 + 6}
    assert [line.split() for line in lines[4:]] == [
        ["::1", "::1", "UHL", "lo0"],
        ["2001:db8::/48", "fe80::99%en2", "UGSc", "en2"],
        ["fd00:1::/64", "fe80::99%en2", "UG2c", "en2"],
        ["fde0:20c6:1fa7:ffff:1:2:3:0", "link#1", "UHL", "lo0"],
        ["fde0:20c6:1fa7:ffff:1:2:3:4", "36:d1:f2:a:b:1", "UHL", "lo0"],
        ["fde0:20c6:1fa7:ffff:5:6:7:0", "fe80::99%en2", "UGH2", "en2"],
        ["fe80::%lo0/64", "fe80::1%lo0", "UcI", "lo0"],
        ["fe80::1%lo0", "link#1", "UHLI", "lo0"],
        ["fe80::%en2/64", "link#4", "UCI", "en2"],
        ["fe80::34d1:f2ff:fe0a:b01%en2", "36:d1:f2:a:b:1", "UHLI", "lo0"],
    ]


def test_the_macs_own_addresses_in_netstat_are_no_clash_for_babblerd() -> None:
    """What babblerd's clash check reads of that table: its cable address's /32 is inside
    the cable's /31 (babblerd's), its node address is its own /32; nothing of the mesh
    prefix is anyone else's."""
    routes = parse.inet_routes(run(MESHED, "netstat -rn -f inet")[1])
    ours = [IPv4Network("10.77.44.9/32"), IPv4Network("10.77.200.4/31")]
    assert clash(DEFAULT_PREFIX, routes, ours) is None
    assert {r.network for r in routes} == {
        *ours, IPv4Network("127.0.0.0/8"), IPv4Network("127.0.0.1/32"),
        IPv4Network("192.168.7.0/24"),
    }  # fmt: skip


def test_ifconfig_lists_lo0_and_a_bridge_member_as_a_mac_does() -> None:
    """lo0's addresses in a Mac's order (127.0.0.1, ::1, fe80::1, then what was added), a
    bridge member without an `nd6` line (it has no IPv6 of its own)."""
    assert run(MESHED, "ifconfig lo0")[1] == (
        "lo0: flags=8049<UP,LOOPBACK,RUNNING,MULTICAST> mtu 16384\n"
        "\toptions=1203<RXCSUM,TXCSUM,TXSTATUS,SW_TIMESTAMP>\n"
        "\tinet 127.0.0.1 netmask 0xff000000\n"
        "\tinet6 ::1 prefixlen 128 \n"
        "\tinet6 fe80::1%lo0 prefixlen 64 scopeid 0x1 \n"
        "\tinet 10.77.44.9 netmask 0xffffffff\n"
        "\tinet6 fde0:20c6:1fa7:ffff:1:2:3:0 prefixlen 128 \n"
        "\tnd6 options=201<PERFORMNUD,DAD>\n"
    )
    assert run(MESHED, "ifconfig en3")[1] == (
        "en3: flags=8963<UP,BROADCAST,SMART,RUNNING,PROMISC,SIMPLEX,MULTICAST> mtu 1500\n"
        "\toptions=460<TSO4,TSO6,CHANNEL_IO>\n"
        "\tether 36:d1:f2:0a:0b:02\n"
        "\tmedia: autoselect <full-duplex>\n"
        "\tstatus: inactive\n"
    )
    assert (
        "\tnd6 options=201<PERFORMNUD,DAD>\n\tmedia: <unknown type>"
        in run(MESHED, "ifconfig bridge0")[1]
    )


def test_networksetup_and_system_profiler_read_back_as_ports_and_cables() -> None:
    plugged = Iface("en2", 2, True, True, 1500)
    loose = Iface("en3", 3, True, False, 1500)
    host = MemoryHost([LO0, plugged, loose])
    listing = run(host, "networksetup -listallhardwareports")[1]
    assert listing.startswith("\nHardware Port: ")
    assert listing.endswith("\nVLAN Configurations\n===================\n\n")
    ports = parse.hardware_ports(listing)
    assert ports["en2"] == "Thunderbolt 1" and ports["bridge0"] == "Thunderbolt Bridge"
    profile = run(host, "system_profiler SPThunderboltDataType -json")[1]
    assert parse.thunderbolt_cables(profile, ports) == {"en2": True, "en3": False}
    # as in the real captures: a cabled receptacle says its micro version, an idle one not
    buses = {
        b["_name"]: b["receptacle_1_tag"] for b in json.loads(profile)["SPThunderboltDataType"]
    }
    assert buses["thunderboltusb4_bus_0"]["micro_version_key"] == "0.0.0"
    assert "micro_version_key" not in buses["thunderboltusb4_bus_1"]
    assert '"micro_version_key" : "0.0.0",\n' in profile  # sorted, after link_status_key


def test_an_unknown_network_service_is_said_on_the_output_with_exit_4() -> None:
    """As networksetup does (crc-org/crc issue 1990: stdout has both lines, stderr nothing)."""
    result = answer(MemoryHost(), "networksetup", ["-setnetworkserviceenabled", "Wi-Fi", "on"])
    assert result == Answer(
        4,
        "Wi-Fi is not a recognized network service.\n** Error: The parameters were not valid.\n",
        "",
    )


@pytest.mark.parametrize(
    ("line", "act"),
    [
        ("ifconfig en2 up", ("up", "en2", True)),
        (
            "networksetup -setnetworkserviceenabled Thunderbolt\0Bridge off",
            ("service", "Thunderbolt Bridge", False),
        ),
        ("ifconfig en2 mtu 9000", ("mtu", "en2", 9000)),
        (
            "ifconfig en2 inet6 fde0:20c6:1fa7:ffff::1/128 pltime 0 add",
            ("add", "en2", Address(IPv6Address("fde0:20c6:1fa7:ffff::1"), 128, deprecated=True)),
        ),
        (
            "ifconfig en2 inet 10.77.1.2/31 alias",
            ("add", "en2", Address(IPv4Address("10.77.1.2"), 31)),
        ),
    ],
)
def test_the_lines_babblerd_runs_act(line: str, act: tuple[object, ...]) -> None:
    host = MemoryHost([LO0, Iface("en2", 2, False, False, 1500)])
    assert run(host, line) == (0, "")
    assert host.done == [act]


def test_removing_what_is_not_there_fails_with_macos_s_words() -> None:
    """babblerd counts these words as "already gone" (links/darwin.py _GONE, "not in table")."""
    host = MemoryHost([LO0, Iface("en2", 2, True, True, 1500)])
    assert run(host, "ifconfig bridge9 deletem en2")[0] == 1
    code, text = run(host, "ifconfig en2 inet6 fde0:20c6:1fa7:ffff::1/128 delete")
    assert code == 1 and "Can't assign requested address" in text
    result = answer(host, "route", ["-n", "delete", "-inet6", "fde0:20c6:1fa7:ffff::9"])
    assert result == Answer(  # route(8) exits 0 all the same
        0,
        "delete host fde0:20c6:1fa7:ffff::9: not in table\n",
        "route: writing to routing socket: not in table\n",
    )
    assert run(host, "ifconfig en9") == (1, "ifconfig: interface en9 does not exist\n")
    assert host.done == []


def test_sysctl_reads_and_writes_as_macos_prints_it() -> None:
    host = MemoryHost(settings={"net.inet6.ip6.forwarding": "0"})
    assert run(host, "sysctl -n net.inet6.ip6.forwarding") == (0, "0\n")
    assert run(host, "sysctl -w net.inet6.ip6.forwarding=1") == (
        0,
        "net.inet6.ip6.forwarding: 0 -> 1\n",
    )
    assert run(host, "sysctl -n net.inet.nothing") == (
        1,
        "sysctl: unknown oid 'net.inet.nothing'\n",
    )


@pytest.mark.parametrize(
    "line",
    [
        "netstat -ib",
        "netstat -ibnd",
        "ifconfig en2 inet6 fde0::1/128 pltime 0 delete",
        "ifconfig en2 media 10GbaseT",
        "ifconfig bridge9 create",  # not "bridge9 does not exist": the lab creates none
        "ifconfig en9 media 10GbaseT",
        "ifconfig en9 inet6 fde0::1/128 pltime 0 delete",
        "networksetup -listnetworkserviceorder",
        "system_profiler SPThunderboltDataType",
        "sysctl -a",
        "route -n get default",
        "socketfilterfw --setglobalstate on",
    ],
)
def test_a_command_line_the_lab_does_not_know_fails_never_an_empty_success(line: str) -> None:
    host = MemoryHost([LO0, Iface("en2", 2, True, True, 1500)])
    code, text = run(host, line)
    assert code == USAGE and "does not answer" in text and host.done == []


def test_a_program_the_lab_does_not_have_is_not_found() -> None:
    assert answer(MemoryHost(), "pfctl", ["-s", "info"]).code == 127


# -- the commands on a node's PATH: bash shims that ask the node's server -----------------------


@pytest.fixture
def node_commands(tmp_path: Path) -> Iterator[tuple[MemoryHost, Path]]:
    """The server over a Mac in memory, on a free port of the loopback, and the shims that ask
    it (in the returned directory)."""
    host = MemoryHost([LO0, Iface("en2", 2, True, True, 1500), Iface("enÅ", 3, True, False, 1500)])
    server = open_server(host, 0)
    thread = threading.Thread(target=server.serve_forever)
    thread.start()
    try:
        shims.install(tmp_path, server.server_address[1])
        yield host, tmp_path
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def shim(bin_dir: Path, *words: str) -> tuple[int, bytes, bytes]:
    """Run a command as babblerd does, in a UTF-8 locale: its exit status, stdout, stderr."""
    done = subprocess.run(
        [str(bin_dir / words[0]), *words[1:]],
        capture_output=True,
        env={"PATH": os.environ["PATH"], "LANG": "C.UTF-8"},
        check=False,
        timeout=30,
    )
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize(
    "words",
    [
        ("ifconfig",),
        ("ifconfig", "-l"),  # an interface whose name is not ASCII
        ("ifconfig", "enÅ2"),  # an error that is not ASCII
        ("networksetup", "-listallhardwareports"),  # starts and ends with blank lines
        ("networksetup", "-setnetworkserviceenabled", "Thunderbolt 1", "off"),  # no output
        ("networksetup", "-setnetworkserviceenabled", "Wi-Fi", "on"),  # exit 4, on stdout
        ("route", "-n", "delete", "-inet6", "fde0::9"),  # both outputs, exit 0
        ("sysctl", "-a"),  # refused
    ],
)
def test_a_command_prints_the_servers_answer_byte_for_byte(
    node_commands: tuple[MemoryHost, Path], words: tuple[str, ...]
) -> None:
    host, bin_dir = node_commands
    expected = answer(MemoryHost(host.links), words[0], words[1:])
    assert shim(bin_dir, *words) == (
        expected.code,
        expected.out.encode(),
        expected.err.encode(),
    )


def test_commands_run_at_once_are_each_answered(node_commands: tuple[MemoryHost, Path]) -> None:
    host, bin_dir = node_commands
    expected = (0, answer(host, "ifconfig", []).out.encode(), b"")
    with ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(lambda _: shim(bin_dir, "ifconfig"), range(32)))
    assert results == [expected] * 32
