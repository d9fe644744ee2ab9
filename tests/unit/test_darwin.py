"""The macOS backend, on Linux: transcribed command outputs and a fake route socket in, the
links the mesh would use and the exact commands it would run out."""

from __future__ import annotations

import json
import socket
from collections.abc import Sequence
from ipaddress import IPv4Address, IPv4Interface, IPv4Network, IPv6Address
from pathlib import Path
from typing import Any

import pytest
import trio

from babbler.core import darwin_output
from babbler.core.errors import KernelError
from babbler.core.ipv4 import DEFAULT_PREFIX
from babbler.core.links import AddressChange, Selector, usable_names
from babbler.daemon.ipv4 import Ipv4
from babbler.daemon.links import darwin
from babbler.daemon.links.darwin import Addresses, DarwinKernel, System
from babbler.daemon.sysctls import SysctlCommand

DATA = Path(__file__).parent / "data" / "darwin"
# `netstat -rn -f inet` of a Mac on a LAN (macOS 14+ columns): no route of babeld's
NETSTAT_INET = (
    "Routing tables\n\nInternet:\n"
    "Destination        Gateway            Flags               Netif Expire\n"
    "default            192.168.1.1        UGScg                 en0       \n"
    "127                127.0.0.1          UCS                   lo0       \n"
    "127.0.0.1          127.0.0.1          UH                    lo0       \n"
    "192.168.1          link#5             UCS                   en0      !\n"
    "192.168.1.1/32     link#5             UCS                   en0      !\n"
    "192.168.1.1        a0:b1:c2:d3:e4:1   UHLWIir               en0   1183\n"
    "192.168.1.20/32    link#5             UCS                   en0      !\n"
)
# The same Mac running babblerd with IPv4 on: its node address on lo0 (a host route to
# itself, as 127.0.0.1), a cable's /31 on en4 with the Mac's own /32 of it (interface-scoped:
# `UCS`, `!`) and the far end's ARP entry, babeld's route through it. The own /32s, the ARP
# entries and the gateway's /32 are rows of telepresenceio/telepresence issue 4048 (2025).
NETSTAT_INET_MESH = NETSTAT_INET + (
    "10.77.31.8         10.77.200.5        UGH2                  en4       \n"
    "10.77.44.9         10.77.44.9         UH                    lo0       \n"
    "10.77.200.4/31     link#9             UC                    en4       \n"
    "10.77.200.4/32     link#9             UCS                   en4      !\n"
    "10.77.200.5        36:d1:f2:cc:d:1    UHLWIi                en4   1183\n"
)
MESH_ADDRESS = IPv6Address("fde0:20c6:1fa7:12:3456:789a:0:1")


class FakeMac:
    """Answers commands from transcribed outputs and records what was run."""

    def __init__(self) -> None:
        self.outputs = {
            ("ifconfig", "-l"): (DATA / "ifconfig-l.txt").read_text(),
            ("ifconfig", "-l", "-u"): (DATA / "ifconfig-l-u.txt").read_text(),
            ("networksetup", "-listallhardwareports"): (
                DATA / "networksetup-listallhardwareports.txt"
            ).read_text(),
            ("ifconfig", "bridge0"): (DATA / "ifconfig-bridge0.txt").read_text(),
            ("ifconfig",): (DATA / "ifconfig.txt").read_text(),
            ("netstat", "-rn", "-f", "inet6"): (DATA / "netstat-rn-f-inet6.txt").read_text(),
            ("netstat", "-rn", "-f", "inet"): NETSTAT_INET,
        }
        self.failures: dict[tuple[str, ...], str] = {}
        self.inet6_of: dict[str, list[dict[str, Any]]] = json.loads(
            (DATA / "netifaces-inet6.json").read_text()
        )
        self.ran: list[tuple[str, ...]] = []
        self.read: list[str] = []  # the links whose addresses were read, in order

    def addresses(self, name: str) -> Addresses:
        self.read.append(name)
        return Addresses(inet6=self.inet6_of.get(name, []))

    async def run(self, args: Sequence[str]) -> str:
        command = tuple(args)
        self.ran.append(command)
        if command in self.failures:
            raise KernelError(f"{' '.join(command)}: {self.failures[command]}", 5)
        if command in self.outputs:
            return self.outputs[command]
        if command[0] == "ifconfig" and len(command) > 2:  # an act: silent, as macOS's
            return ""
        if command[:3] == ("route", "-n", "delete"):
            return f"delete host {command[4]}\n"
        # as the lab's Mac (babbler/lab/macos): never an empty success
        raise KernelError(f"{' '.join(command)}: the fake Mac does not answer this", 64)

    def system(self) -> System:
        return System(
            run=self.run,
            addresses=self.addresses,
            index=lambda name: self.outputs[("ifconfig", "-l")].split().index(name) + 1,
        )


@pytest.fixture
def mac() -> FakeMac:
    return FakeMac()


async def test_default_selection_takes_wired_ports_outside_the_bridge(mac: FakeMac) -> None:
    links = await DarwinKernel(mac.system(), None).read_links()
    selector = Selector()
    selected = {name for name, link in links.items() if selector.selects(link)}
    # en1 Wi-Fi, en2/en3 in Thunderbolt Bridge, en6 iPhone tether, never; nor en7, a T2
    # Mac's link to its T2 chip, which no hardware port names (as on real T2 Macs).
    assert selected == {"en0", "en4", "en5"}
    # en5 is still doing DAD on its link-local: selected, not yet usable.
    assert usable_names(links, selector) == {"en0", "en4"}
    assert links["en4"].category == "thunderbolt"
    assert links["en0"].category == "ethernet"
    assert links["en2"].master == links["bridge0"].index
    assert links["en4"].addresses == {MESH_ADDRESS}
    assert links["en2"].up and links["en2"].link_local is False  # up, but bridged
    # A Mac keeps a port up with no cable in it: `status:` says whether a far end is live.
    assert links["en2"].carrier is False and links["en4"].carrier is True
    assert links["utun0"].carrier is None  # no status line


async def test_interface_globs_and_excludes_apply_as_on_linux(mac: FakeMac) -> None:
    links = await DarwinKernel(mac.system(), None).read_links()
    assert usable_names(links, Selector(exclude=("en0",))) == {"en4"}
    assert usable_names(links, Selector(interface=("en*",), exclude=("en1",))) == {
        "en0",
        "en4",
        "en6",
        "en7",
    }


async def test_networksetup_is_asked_again_only_when_ports_change(mac: FakeMac) -> None:
    kernel = DarwinKernel(mac.system(), None)
    await kernel.read_links()
    await kernel.read_links()
    asked = ("networksetup", "-listallhardwareports")
    assert mac.ran.count(asked) == 1
    new_port = "en8: flags=8863<UP,BROADCAST,SMART,RUNNING,SIMPLEX,MULTICAST> mtu 1500\n"
    mac.outputs[("ifconfig",)] += new_port
    mac.outputs[("ifconfig", "-l")] += " en8"
    await kernel.read_links()
    assert mac.ran.count(asked) == 2


async def test_a_link_no_port_names_is_no_cable_and_is_asked_about_now_and_then(
    mac: FakeMac, autojump_clock: trio.testing.MockClock
) -> None:
    """en7 (a T2 Mac's link to its T2) is never named; a new adapter, en8, is named by
    networksetup only a moment after ifconfig lists it: it becomes a cable within
    UNNAMED_RECHECK, and networksetup is not asked at every pass meanwhile."""
    kernel = DarwinKernel(mac.system(), None)
    asked = ("networksetup", "-listallhardwareports")
    mac.outputs[("ifconfig",)] += "en8: flags=8863<UP,BROADCAST,SMART,RUNNING> mtu 1500\n"
    mac.outputs[("ifconfig", "-l")] += " en8"
    links = await kernel.read_links()
    assert not links["en8"].has_device and not links["en7"].has_device
    mac.outputs[asked] += "\nHardware Port: USB 10/100/1000 LAN\nDevice: en8\n"
    for _ in range(5):
        await trio.sleep(darwin.REREAD_INTERVAL)
        links = await kernel.read_links()
    assert mac.ran.count(asked) == 1
    await trio.sleep(darwin.UNNAMED_RECHECK)
    links = await kernel.read_links()
    assert links["en8"].has_device and not links["en7"].has_device
    assert mac.ran.count(asked) == 2


async def test_a_link_gone_between_listing_and_reading_is_skipped(mac: FakeMac) -> None:
    system = mac.system()
    listed = system.index

    def index(name: str) -> int:
        if name == "en5":
            raise OSError("no such interface")
        return listed(name)

    system.index = index
    links = await DarwinKernel(system, None).read_links()
    assert "en5" not in links and links["en2"].master == links["bridge0"].index
    # one listing per pass: names, states and bridges' members from the same moment
    assert [c for c in mac.ran if c[0] == "ifconfig"] == [("ifconfig",)]
    # and one netifaces read per link, both families from it
    assert sorted(mac.read) == sorted(links)


async def test_addresses_are_added_and_removed_with_ifconfig(mac: FakeMac) -> None:
    kernel = DarwinKernel(mac.system(), None)
    change = AddressChange("en4", 9, MESH_ADDRESS)
    await kernel.add_address(change)
    await kernel.remove_address(change)
    assert mac.ran == [
        ("ifconfig", "en4", "inet6", f"{MESH_ADDRESS}/128", "add"),
        ("ifconfig", "en4", "inet6", f"{MESH_ADDRESS}/128", "delete"),
    ]


async def test_removing_an_address_already_gone_is_fine_other_failures_are_not(
    mac: FakeMac,
) -> None:
    kernel = DarwinKernel(mac.system(), None)
    change = AddressChange("en4", 9, MESH_ADDRESS)
    delete = tuple(darwin_output.address_command(change, "delete"))
    mac.failures[delete] = "ioctl (SIOCDIFADDR_IN6): Can't assign requested address"
    await kernel.remove_address(change)
    mac.failures[delete] = "ioctl (SIOCDIFADDR_IN6): Operation not permitted"
    with pytest.raises(KernelError, match="Operation not permitted"):
        await kernel.remove_address(change)


async def test_only_babelds_routes_in_the_mesh_prefix_are_flushed(mac: FakeMac) -> None:
    flushed = await DarwinKernel(mac.system(), None).flush_babel_routes()
    deletes = [command for command in mac.ran if command[0] == "route"]
    assert deletes == [
        ("route", "-n", "delete", "-inet6", "fde0:20c6:1fa7:ab:cdef:123:0:1"),
        ("route", "-n", "delete", "-inet6", "fde0:20c6:1fa7:ab:cdef:123:0:2"),
        ("route", "-n", "delete", "-inet6", "fde0:20c6:1fa7:77::/64"),
    ]
    assert flushed == 3


def test_parsers_read_the_transcribed_outputs() -> None:
    ports = darwin_output.hardware_ports(
        (DATA / "networksetup-listallhardwareports.txt").read_text()
    )
    assert ports["en1"] == "Wi-Fi" and ports["bridge0"] == "Thunderbolt Bridge"
    assert darwin_output.bridge_members((DATA / "ifconfig-bridge0.txt").read_text()) == {
        "en2",
        "en3",
    }
    assert darwin_output.address_facts(
        [{"addr": "fe80::1%en9", "flags": darwin_output.IN6_IFF_DUPLICATED}]
    ) == (
        False,
        frozenset(),
        frozenset(),
    )


def test_ipv4_addresses_deprecated_ones_and_the_ipv4_routes_are_read() -> None:
    mesh = IPv6Address("fde0:20c6:1fa7:ffff:1:2:3:1")
    entries = [{"addr": str(mesh), "flags": darwin_output.IN6_IFF_DEPRECATED}]
    assert darwin_output.address_facts(entries) == (False, frozenset({mesh}), frozenset({mesh}))
    inet = [{"addr": "10.77.168.99", "netmask": "255.255.255.254"}, {"addr": "bad"}]
    assert darwin_output.ipv4_facts(inet) == {IPv4Interface("10.77.168.99/31")}
    netstat = (
        "Routing tables\n\nInternet:\n"
        "Destination        Gateway            Flags               Netif Expire\n"
        "default            192.168.1.1        UGScg                 en0\n"
        "10.77/16           link#4             UCS                   en0      !\n"
        "10.77.31.8         fe80::1%en5        UGH2                  en5\n"
        "127                127.0.0.1          UCS                   lo0\n"
        "192.168.1          link#4             UCS                   en0      !\n"
        "192.168.1.20       a0:b1:c2:d3:e4:f5  UHLWIi                en0   1170\n"
    )
    routes = [r.network for r in darwin_output.inet_routes(netstat)]
    # 192.168.1.20, an ARP entry, is in en0's network: the network row stands for it
    assert routes == [
        IPv4Network("10.77.0.0/16"),
        IPv4Network("127.0.0.0/8"),
        IPv4Network("192.168.1.0/24"),
    ]
    assert darwin_output.babel_routes_v4(netstat) == ["10.77.31.8"]
    # an older netstat, with Refs and Use before Netif (bettercap/bettercap pull request 23)
    older = (
        "Routing tables\n\nInternet:\n"
        "Destination        Gateway            Flags        Refs      Use   Netif Expire\n"
        "default            172.16.16.1        UGSc           48        0     en0\n"
        "127.0.0.1          127.0.0.1          UH              1    27779     lo0\n"
        "172.16.16          link#4             UCS             2        0     en0      !\n"
        "172.16.16.9/32     link#4             UCS             1        0     en0      !\n"
    )
    assert [r.network for r in darwin_output.inet_routes(older)] == [
        IPv4Network("127.0.0.1/32"),
        IPv4Network("172.16.16.0/24"),
    ]


async def test_the_macs_own_mesh_addresses_and_their_far_ends_are_no_clash(
    mac: FakeMac, tmp_path: Path
) -> None:
    """A Mac lists its own IPv4 addresses (an interface-scoped /32 each) and the ARP entries of
    its neighbours in `netstat -rn`: babblerd's cable address and its far end's are in the
    cable's /31, which is babblerd's, so they are no clash; the far end's address routed through
    another link (a VPN's /32 on utun0) still is."""
    mac.outputs[("netstat", "-rn", "-f", "inet")] = NETSTAT_INET_MESH
    ours = {("lo0", IPv4Interface("10.77.44.9/32")), ("en4", IPv4Interface("10.77.200.4/31"))}
    state = Ipv4(DEFAULT_PREFIX, tmp_path, node_id=1, recorded=frozenset(ours))
    kernel = DarwinKernel(mac.system(), None)
    assert state.check(await kernel.read_routes_v4()) is None
    mac.outputs[("netstat", "-rn", "-f", "inet")] = NETSTAT_INET_MESH + (
        "10.77.200.5/32     link#17            UCS                 utun0      !\n"
    )
    problem = state.check(await DarwinKernel(mac.system(), None).read_routes_v4())
    assert problem == "route 10.77.200.5/32 via link#17 overlaps 10.77.0.0/16"


def test_ipv4_and_not_preferred_addresses_have_their_ifconfig_lines() -> None:
    cable = AddressChange("en5", 9, IPv4Address("10.77.168.99"), 31)
    assert darwin_output.address_command(cable, "add") == [
        "ifconfig", "en5", "inet", "10.77.168.99/31", "alias"
    ]  # fmt: skip
    assert darwin_output.address_command(cable, "delete")[-1] == "-alias"
    link = AddressChange("en5", 9, MESH_ADDRESS, deprecated=True)
    assert darwin_output.address_command(link, "add") == [
        "ifconfig", "en5", "inet6", f"{MESH_ADDRESS}/128", "pltime", "0", "add"
    ]  # fmt: skip


async def test_a_route_message_wakes_the_watcher_and_silence_still_rereads() -> None:
    ours, system_side = trio.socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    with ours, system_side:
        kernel = DarwinKernel(FakeMac().system(), ours, reread_interval=0.2)
        with trio.fail_after(5):
            await system_side.send(b"\x9c\x00\x05\x0c")  # RTM_IFINFO-shaped bytes
            start = trio.current_time()
            await kernel.wait_for_change()
            assert trio.current_time() - start < 0.2  # woken by the message
            start = trio.current_time()
            await kernel.wait_for_change()
            assert trio.current_time() - start >= 0.2  # nothing: the periodic re-read


def test_media_lines_give_link_speeds() -> None:
    states = darwin_output.ifconfig_states((DATA / "ifconfig.txt").read_text())
    speeds = {name: state.speed_mbps for name, state in states.items() if state.speed_mbps}
    assert speeds == {"en0": 10000, "en6": 100, "en7": 100}  # Thunderbolt ports say none


async def test_snapshot_carries_speeds_and_thunderbolt_without_one_counts_as_fast(
    mac: FakeMac,
) -> None:
    from babbler.core.cost import link_cost

    links = await darwin.DarwinKernel(mac.system(), None).read_links()
    assert links["en0"].speed_mbps == 10000 and link_cost(links["en0"]) == 32
    assert links["en6"].speed_mbps == 100
    assert links["en4"].speed_mbps is None and links["en4"].is_thunderbolt
    assert link_cost(links["en4"]) == 32


async def test_links_are_brought_up_and_down_with_ifconfig_and_settings_with_sysctl(
    mac: FakeMac,
) -> None:
    kernel = DarwinKernel(mac.system(), None)
    links = await kernel.read_links()
    await kernel.set_link_up(links["en4"], True)
    await kernel.set_link_up(links["en4"], False)
    assert mac.ran[-2:] == [("ifconfig", "en4", "up"), ("ifconfig", "en4", "down")]
    assert isinstance(kernel.settings, SysctlCommand)  # forwarding through sysctl(8)
    assert await kernel.read_rules() == set()  # no policy routing: docs/security.md


async def test_thunderbolt_offers_9000_and_sizes_are_set_with_ifconfig(mac: FakeMac) -> None:
    """macOS: ifconfig gives each link's MTU; only Thunderbolt's largest is known (9000),
    so under auto the Thunderbolt cable is sized and Ethernet is not."""
    from babbler.core import mtu

    kernel = DarwinKernel(mac.system(), None)
    links = await kernel.read_links()
    assert links["en4"].is_thunderbolt and links["en4"].max_mtu == 9000
    assert links["en0"].max_mtu is None and links["en0"].mtu == 1500
    far = {"en4": 65520, "en0": 9000}  # a Linux far end on each
    wanted = mtu.targets([links["en4"], links["en0"]], mtu.AUTO, far)
    assert wanted == {"en4": 9000}
    await kernel.set_mtu(links["en4"], wanted["en4"])
    assert mac.ran[-1] == ("ifconfig", "en4", "mtu", "9000")


async def test_a_command_that_hangs_is_ended_and_one_missing_is_a_kernel_error() -> None:
    """Every command runs off the loop with a deadline (sysctls.COMMAND_TIMEOUT)."""
    with trio.fail_after(2):
        start = trio.current_time()
        with pytest.raises(KernelError, match=r"^sleep 30: no answer in 0.2 s$"):
            await darwin.run_command(["sleep", "30"], hung_after=0.2)
        assert trio.current_time() - start < 1.0  # killed, not asked to stop and waited for
        with pytest.raises(KernelError, match="no-such-command-here: No such file"):
            await darwin.run_command(["no-such-command-here"])
        with pytest.raises(KernelError, match=r"^false: exit 1$"):
            await darwin.run_command(["false"])
        assert await darwin.run_command(["echo", "lo0 en0"]) == "lo0 en0\n"


async def test_a_command_that_fails_saying_why_on_its_output_is_quoted(tmp_path: Path) -> None:
    """networksetup says what went wrong on its standard output, with nothing on its error
    output, and exits 4 (crc-org/crc issue 1990): the error quotes it, in one line."""
    networksetup = tmp_path / "networksetup"
    networksetup.write_text(
        "#!/bin/sh\n"
        'echo "$2 is not a recognized network service."\n'
        'echo "** Error: The parameters were not valid."\n'
        "exit 4\n"
    )
    networksetup.chmod(0o755)
    args = [str(networksetup), "-setnetworkserviceenabled", "Thunderbolt 9", "off"]
    with pytest.raises(KernelError) as failed:
        await darwin.run_command(args)
    assert str(failed.value) == (
        f"{' '.join(args)}: Thunderbolt 9 is not a recognized network service.;"
        " ** Error: The parameters were not valid."
    )


@pytest.mark.parametrize(
    ("command", "garbage", "says"),
    [
        (("ifconfig",), "sysctl: unknown oid\n", "ifconfig printed no lo0"),
        (("networksetup", "-listallhardwareports"), "** Error **\n", "no hardware port"),
    ],
    ids=["ifconfig", "networksetup"],
)
async def test_a_command_that_prints_garbage_is_a_failed_read_not_an_empty_mac(
    mac: FakeMac, command: tuple[str, ...], garbage: str, says: str
) -> None:
    """Garbage from ifconfig would read as a Mac without links (the mesh's addresses and
    babeld's interfaces given up); from networksetup, as a Mac whose Wi-Fi is a cable."""
    mac.outputs[command] = garbage
    with pytest.raises(KernelError, match=says):
        await DarwinKernel(mac.system(), None).read_links()


async def test_the_clash_checks_routes_are_read_again_after_a_message_an_edit_or_routes_for(
    mac: FakeMac, autojump_clock: trio.testing.MockClock
) -> None:
    """A pass every 2 s checks the host's IPv4 routes; one `netstat` serves them until a
    routing message comes (a Mac sends one for every route added or deleted), babblerd
    changes something itself, or ROUTES_FOR passes (a route nothing announced)."""
    netstat = ("netstat", "-rn", "-f", "inet")
    vpn = IPv4Network("10.77.0.0/16")
    ours, system_side = trio.socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    with ours, system_side:
        kernel = DarwinKernel(mac.system(), ours)
        links = await kernel.read_links()
        before = await kernel.read_routes_v4()
        await kernel.wait_for_change()  # silence: the periodic pass
        assert await kernel.read_routes_v4() == before
        assert mac.ran.count(netstat) == 1
        mac.outputs[netstat] += "10.77/16           link#9             UCS        utun3       \n"
        await system_side.send(b"\x9c\x00\x05\x01")  # RTM_ADD-shaped bytes
        await kernel.wait_for_change()
        assert vpn in {r.network for r in await kernel.read_routes_v4()}
        await kernel.set_mtu(links["en4"], 9000)
        await kernel.read_routes_v4()
        assert mac.ran.count(netstat) == 3
        mac.outputs[netstat] = NETSTAT_INET  # the route goes, and nothing says so
        assert vpn in {r.network for r in await kernel.read_routes_v4()}
        await trio.sleep(darwin.ROUTES_FOR)
        assert vpn not in {r.network for r in await kernel.read_routes_v4()}
        assert mac.ran.count(netstat) == 4
