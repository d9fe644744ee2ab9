"""What macOS's commands print, made from a snapshot of a lab node's namespace. Pure.

The layouts follow real Macs' outputs (each checked against public pastes: docs/macos.md,
"Where the formats come from"); the values are the lab's own. Only what babblerd and
`babblerctl doctor` run is here: `ifconfig` (`-l`, `-l -u`, all, one), `netstat -rn -f
inet|inet6`, `netstat -ibn` (each link's counters), `networksetup -listallhardwareports`,
`system_profiler SPThunderboltDataType -json`, `sysctl -w`, socketfilterfw's two questions.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_network

# <net/if.h> flag bits, as ifconfig prints them (value and names).
IFF = (
    (0x1, "UP"),
    (0x2, "BROADCAST"),
    (0x8, "LOOPBACK"),
    (0x20, "SMART"),
    (0x40, "RUNNING"),
    (0x100, "PROMISC"),
    (0x800, "SIMPLEX"),
    (0x8000, "MULTICAST"),
)
LOOPBACK_OPTIONS = "options=1203<RXCSUM,TXCSUM,TXSTATUS,SW_TIMESTAMP>"
ETHER_OPTIONS = "options=460<TSO4,TSO6,CHANNEL_IO>"  # a Thunderbolt port's
BRIDGE_OPTIONS = "options=63<RXCSUM,TXCSUM,TSO4,TSO6>"
ND6 = "nd6 options=201<PERFORMNUD,DAD>"
LOOPBACK_MTU = 16384


@dataclass(frozen=True)
class Address:
    address: IPv4Address | IPv6Address
    prefixlen: int
    deprecated: bool = False  # preferred lifetime 0 (`pltime 0`)
    tentative: bool = False  # duplicate address detection not done yet


@dataclass(frozen=True)
class Iface:
    name: str
    index: int
    up: bool
    carrier: bool  # a far end (a cable plugged into a live port)
    mtu: int
    mac: str | None = None
    kind: str = "ether"  # "ether", "loopback" or "bridge"
    addresses: tuple[Address, ...] = ()
    members: tuple[str, ...] = ()  # a bridge's
    member_of: str | None = None  # the bridge a port is in (promiscuous there, as on a Mac)


@dataclass(frozen=True)
class Counters:
    """A link's counters since it was made, as the namespace's kernel keeps them."""

    rx_bytes: int = 0
    tx_bytes: int = 0
    rx_packets: int = 0
    tx_packets: int = 0


@dataclass(frozen=True)
class Route:
    destination: IPv4Network | IPv6Network
    interface: str
    gateway: IPv4Address | IPv6Address | None = None  # None: on the link
    babel: bool = False  # babeld's (RTF_PROTO2: flag `2`)


@dataclass(frozen=True)
class Port:
    """A hardware port, as networksetup lists it."""

    name: str  # "Ethernet", "Thunderbolt 1", "Thunderbolt Bridge"
    device: str
    mac: str


@dataclass(frozen=True)
class Bus:
    """One Thunderbolt receptacle, as system_profiler describes it."""

    receptacle: int  # the N of "Thunderbolt N"
    speed_gbps: int  # 40 (Thunderbolt 4), 80 (Thunderbolt 5)
    domain_uuid: str  # this Mac's domain on that bus
    far: str | None = None  # the far Mac's domain UUID, None: nothing plugged in
    far_name: str = "Mac"
    extra: Mapping[str, str] = field(default_factory=dict)


def flags(iface: Iface) -> str:
    bits = (
        {0x8, 0x40, 0x8000}
        if iface.kind == "loopback"
        else {0x2, 0x20, 0x800, 0x8000} | ({0x100} if iface.member_of else set())
    )
    if iface.up:
        bits |= {0x1, 0x40}
    elif iface.kind != "loopback":
        bits -= {0x40}
    value = sum(bits)
    return f"flags={value:x}<{','.join(name for bit, name in IFF if bit in bits)}>"


def names(ifaces: Iterable[Iface], up_only: bool = False) -> str:
    """`ifconfig -l` (`-l -u`: the ones up): names on one line."""
    return " ".join(i.name for i in ifaces if i.up or not up_only) + "\n"


def _inet(iface: Iface, address: Address) -> str:
    assert isinstance(address.address, IPv4Address)
    network = IPv4Network(f"{address.address}/{address.prefixlen}", strict=False)
    mask = f"0x{int(network.netmask):08x}"
    if iface.kind == "loopback":
        return f"\tinet {address.address} netmask {mask}"
    return f"\tinet {address.address} netmask {mask} broadcast {network.broadcast_address}"


def _inet6(iface: Iface, address: Address) -> str:
    """af_inet6.c: `prefixlen N `, then each flag and a space in its fixed order (tentative,
    deprecated, ..., secured), then `scopeid 0xN ` for a scoped address: the line ends with a
    space on every macOS from 13 to 26."""
    assert isinstance(address.address, IPv6Address)
    local = address.address.is_link_local
    shown = f"{address.address}%{iface.name}" if local else address.address
    words = [f"\tinet6 {shown} prefixlen {address.prefixlen}"]
    words += ["tentative"] if address.tentative else []
    words += ["deprecated"] if address.deprecated else []
    words += ["secured"] if local and iface.kind != "loopback" else []
    words += [f"scopeid 0x{iface.index:x}"] if local else []
    return " ".join(words) + " "


def _listed_at(iface: Iface, address: Address) -> int:
    """ifconfig lists an interface's addresses in the order they came. A Mac's lo0 starts
    with 127.0.0.1, ::1 and fe80::1 (in that order), a port with its IPv6 link-local, then
    its IPv4; what is added later follows (the namespace does not say when: IPv4 first)."""
    ip = address.address
    link_local = isinstance(ip, IPv6Address) and ip.is_link_local
    if iface.kind == "loopback":
        if ip.is_loopback:
            return 0 if ip.version == 4 else 1
        if link_local:
            return 2
        return 3 if ip.version == 4 else 4
    if link_local:
        return 0
    return 1 if ip.version == 4 else 2


def block(iface: Iface, members: Mapping[str, Iface] | None = None, alone: bool = False) -> str:
    """One interface as `ifconfig` shows it: one of all, or `alone` (`ifconfig NAME`, where
    a bridge also prints its address cache)."""
    lines = [f"{iface.name}: {flags(iface)} mtu {iface.mtu}"]
    lines.append(
        "\t"
        + {"loopback": LOOPBACK_OPTIONS, "bridge": BRIDGE_OPTIONS}.get(iface.kind, ETHER_OPTIONS)
    )
    if iface.mac is not None and iface.kind != "loopback":
        lines.append(f"\tether {iface.mac}")
    lines += [
        _inet(iface, a) if isinstance(a.address, IPv4Address) else _inet6(iface, a)
        for a in sorted(iface.addresses, key=lambda a: _listed_at(iface, a))
    ]
    if iface.kind == "bridge":
        lines += [
            "\tConfiguration:",
            "\t\tid 0:0:0:0:0:0 priority 0 hellotime 0 fwddelay 0",
            "\t\tmaxage 0 holdcnt 0 proto stp maxaddr 100 timeout 1200",
            "\t\troot id 0:0:0:0:0:0 priority 0 ifcost 0 port 0",
            "\t\tipfilter disabled flags 0x0",
        ]
        for name in iface.members:
            port = (members or {}).get(name)
            lines.append(f"\tmember: {name} flags=3<LEARNING,DISCOVER>")
            lines.append(
                f"\t        ifmaxaddr 0 port {port.index if port else 0} priority 0 path cost 0"
            )
        if alone:
            lines.append("\tAddress cache:")
    if iface.member_of is None:  # a bridge's member has no IPv6 of its own: no nd6 line
        lines.append(f"\t{ND6}")
    if iface.kind == "ether":
        lines.append("\tmedia: autoselect <full-duplex>")
        lines.append(f"\tstatus: {'active' if iface.carrier and iface.up else 'inactive'}")
    elif iface.kind == "bridge":
        lines.append("\tmedia: <unknown type>")
        active = iface.up and any((members or {}).get(m, iface).carrier for m in iface.members)
        lines.append(f"\tstatus: {'active' if active else 'inactive'}")
    return "\n".join(lines) + "\n"


def listing(ifaces: Iterable[Iface]) -> str:
    """`ifconfig`: every interface."""
    every = list(ifaces)
    by_name = {i.name: i for i in every}
    return "".join(block(i, by_name) for i in every)


# netstat -rn (netstat.tproj/route.c, macOS 14 and later): Destination and Gateway columns of
# W (18 for inet, 39 for inet6 with -n), Flags of 10, Netif right-aligned in 14, Expire in 6.
WIDTHS = {4: 18, 6: 39}
CLASSFUL = ((0x80, 8), (0xC0, 16), (0xE0, 24))  # class A, B, C: first octet below -> mask


def _classful_length(first: int) -> int | None:
    return next((length for below, length in CLASSFUL if first < below), None)


def _netstat_destination(destination: IPv4Network | IPv6Network, interface: str) -> str:
    """What netstat prints: `default`, a host route's address alone, a network with its
    length; IPv4 networks without their trailing zero octets, and without the length when it
    is the address's classful one (`127`, `169.254`, `10/16`, `10.77.185.10/31`)."""
    if destination.prefixlen == 0:
        return "default"
    address = destination.network_address
    full = destination.prefixlen == destination.max_prefixlen
    if isinstance(address, IPv6Address):
        shown = f"{address}%{interface}" if address.is_link_local else str(address)
        return shown if full else f"{shown}/{destination.prefixlen}"
    if full:
        return str(address)
    octets = str(address).split(".")
    while len(octets) > 1 and octets[-1] == "0":
        octets.pop()
    natural = _classful_length(int(octets[0])) == destination.prefixlen
    return ".".join(octets) if natural else f"{'.'.join(octets)}/{destination.prefixlen}"


# netstat's flag letters, in the order it prints them (route.c's table of RTF_* bits)
ROUTE_LETTERS = "UGHRDMmdCXLS12Wc3BbIiYrg"


def _letters(flags: str) -> str:
    return "".join(letter for letter in ROUTE_LETTERS if letter in flags)


def _route_flags(route: Route) -> str:
    """babeld's routes are RTF_UP|RTF_GATEWAY|RTF_PROTO2 (+RTF_HOST), no RTF_STATIC (its
    kernel_socket.c); others are static (S), or cloning (C) on a link. xnu (in_rmx.c,
    in6_rmx.c) adds RTF_PRCLONING (c) to every route that is neither a host route nor
    cloning (`UG2c`, `UGSc`), and scopes a link-local network to its link (RTF_IFSCOPE, I:
    `UCI`)."""
    destination = route.destination
    full = destination.prefixlen == destination.max_prefixlen
    flags = "U" + ("G" if route.gateway is not None else "") + ("H" if full else "")
    if route.babel:
        flags += "2"
    else:
        flags += "C" if not full and route.gateway is None else "S"
    flags += "c" if not full and "C" not in flags else ""
    scoped = isinstance(destination, IPv6Network) and destination.network_address.is_link_local
    flags += "I" if scoped else ""
    return _letters(flags)


def _short_mac(mac: str) -> str:
    """A MAC as netstat prints a gateway's: its bytes without leading zeros (`36:d1:f2:0:1:a`)."""
    return ":".join(f"{int(byte, 16):x}" for byte in mac.split(":"))


@dataclass(frozen=True, order=True)
class _Row:
    """One line of `netstat -rn`, with where the routing table's walk puts it."""

    at: tuple[int, int]  # the destination's address (an IPv6 scope in it, as xnu keeps it), length
    destination: str
    gateway: str
    flags: str
    netif: str
    expire: str = ""


def _at(network: IPv4Network | IPv6Network, index: int) -> tuple[int, int]:
    """xnu keeps a link-local's scope in the address's second 16 bits (fe80:4::...): the walk
    lists each link's fe80:: rows together, in interface order."""
    value = int(network.network_address)
    if isinstance(network, IPv6Network) and network.network_address.is_link_local:
        value |= index << 96
    return value, network.prefixlen


def _own_rows(iface: Iface, family: int, loopback: str) -> list[_Row]:
    """The rows a Mac has for an interface's own addresses: IPv6 ones on lo0 (`UHL`, a
    link-local `UHLI`, the interface's MAC or `link#N` as gateway), IPv4 ones as an
    interface-scoped /32 (`UCS`, `!`), lo0's as a host route to itself (`UH`); lo0's
    networks (`127`, `fe80::%lo0/64`) through its own address."""
    rows = []
    for address in iface.addresses:
        ip = address.address
        if ip.version != family:
            continue
        network = ip_network(f"{ip}/{address.prefixlen}", strict=False)
        host = ip_network(ip)
        if isinstance(ip, IPv6Address):
            link_local = ip.is_link_local
            shown = f"{ip}%{iface.name}" if link_local else str(ip)
            if ip == IPv6Address("::1"):
                gateway = shown
            elif iface.kind != "loopback" and iface.mac:
                gateway = _short_mac(iface.mac)
            else:
                gateway = f"link#{iface.index}"
            flags = "UHLI" if link_local else "UHL"
            rows.append(_Row(_at(host, iface.index), shown, gateway, flags, loopback))
            if iface.kind == "loopback" and network.prefixlen < host.prefixlen:
                shown_net = _netstat_destination(network, iface.name)
                flags = "UcI" if link_local else "Uc"
                rows.append(_Row(_at(network, iface.index), shown_net, shown, flags, loopback))
        elif iface.kind == "loopback":
            rows.append(_Row(_at(host, iface.index), str(ip), str(ip), "UH", loopback))
            if network.prefixlen < host.prefixlen:
                shown_net = _netstat_destination(network, iface.name)
                rows.append(_Row(_at(network, iface.index), shown_net, str(ip), "UCS", loopback))
        else:
            at, link = _at(host, iface.index), f"link#{iface.index}"
            rows.append(_Row(at, f"{ip}/32", link, "UCS", iface.name, "!"))
    return rows


def netstat(routes: Iterable[Route], family: int, ifaces: Iterable[Iface]) -> str:
    """`netstat -rn -f inet` (4) or `-f inet6` (6): the routes, and the rows of the
    interfaces' own addresses, in the routing table's order."""
    width = WIDTHS[family]
    every = list(ifaces)
    indexes = {i.name: i.index for i in every}
    loopback = next((i for i in every if i.kind == "loopback"), None)
    lo0 = loopback.name if loopback is not None else "lo0"
    rows = [row for iface in every for row in _own_rows(iface, family, lo0)]
    # lo0's networks are printed from its addresses (above), not from the table's copy
    through_own = {
        ip_network(f"{a.address}/{a.prefixlen}", strict=False)
        for a in (loopback.addresses if loopback is not None else ())
    }
    for route in routes:
        if route.interface == lo0 and route.gateway is None and route.destination in through_own:
            continue
        gateway = route.gateway
        if gateway is None:
            shown = f"link#{indexes.get(route.interface, 0)}"
        elif isinstance(gateway, IPv6Address) and gateway.is_link_local:
            shown = f"{gateway}%{route.interface}"
        else:
            shown = str(gateway)
        destination = _netstat_destination(route.destination, route.interface)
        at = _at(route.destination, indexes.get(route.interface, 0))
        rows.append(_Row(at, destination, shown, _route_flags(route), route.interface))

    def line(destination: str, gateway: str, flags: str, netif: str, expire: str) -> str:
        start = f"{destination:<{width}} {gateway:<{width}} "
        return f"{start}{flags:<10.10} {netif:>14.14} {expire:>6}\n"

    lines = ["Routing tables\n", "\n", "Internet:\n" if family == 4 else "Internet6:\n"]
    lines.append(line("Destination", "Gateway", "Flags", "Netif", "Expire"))
    lines += [line(r.destination, r.gateway, r.flags, r.netif, r.expire) for r in sorted(rows)]
    return "".join(lines)


# netstat -ibn as public pastes from Macs lay it out (network_cmds' if.c: gopsutil's capture
# from 10.10, exo-adjacent tools' test data from recent macOS). Name 10, Mtu 5, then 30
# characters of Network and Address whose split depends on the row: a link's `<Link#N>` in
# 11 and its MAC (none on lo0, utun, gif) after it; IPv4 13 + 15 (`192.168.1`,
# `192.168.1.23`); IPv6 11 + 17, the Network the address itself with its zone and length
# (`fe80::1%lo0`, `::1/128`, `fe80::14a2:` cut) and the Address in the kernel's embedded
# scope (`fe80:b::14a2:e49c`, cut). Then Ipkts 8, Ierrs 5, Ibytes 10, Opkts 8, Oerrs 5,
# Obytes 10, Coll 5, right-aligned; a wider number pushes the rest of the row along. An
# address's row repeats its link's counts with `-` for errors; a down link's name ends in `*`.
# babbler's reader (core/darwin_output.py link_counters) reads the numbers from the row's end.
INTERFACE_HEADER = (
    f"{'Name':<10} {'Mtu':<5} {'Network':<13} {'Address':<15}"
    f" {'Ipkts':>8} {'Ierrs':>5} {'Ibytes':>10} {'Opkts':>8} {'Oerrs':>5} {'Obytes':>10}"
    f" {'Coll':>5}\n"
)
NETWORK_ADDRESS = 30  # the characters of both columns, the space after each included


def _interface_row(iface: Iface, place: str, counted: Counters, per_link: bool) -> str:
    """One row: the link's own (`<Link#N>`: errors and collisions 0) or an address's (its
    link's counts again, errors and collisions `-`); `place` its Network and Address."""
    name = iface.name + ("" if iface.up else "*")
    errors = "0" if per_link else "-"
    return (
        f"{name:<10.10} {iface.mtu:<5} {place:<{NETWORK_ADDRESS}}"
        f"{counted.rx_packets:>8} {errors:>5} {counted.rx_bytes:>10}"
        f" {counted.tx_packets:>8} {errors:>5} {counted.tx_bytes:>10} {errors:>5}\n"
    )


def _link_place(iface: Iface) -> str:
    """`<Link#N>` and the link's MAC (none on a loopback)."""
    mac = iface.mac if iface.mac is not None and iface.kind != "loopback" else ""
    return f"{f'<Link#{iface.index}>':<11.11} {mac}" + (" " if mac else "")


def _address_place(iface: Iface, address: Address) -> str:
    """Network and Address of an address's row: IPv4's network as netstat shortens it and
    the address; IPv6's address with its zone (a link-local's) and length, then the address
    with the scope the kernel keeps in its second 16 bits (`fe80:5::1`)."""
    ip = address.address
    if isinstance(ip, IPv4Address):
        network = ip_network(f"{ip}/{address.prefixlen}", strict=False)
        return f"{_netstat_destination(network, iface.name):<13.13} {ip!s:<15.15} "
    zone, shown = "", str(ip)
    if ip.is_link_local:
        zone, shown = f"%{iface.name}", str(IPv6Address(int(ip) | (iface.index << 96)))
    return f"{f'{ip}{zone}/{address.prefixlen}':<11.11} {shown:<17.17} "


def interface_table(ifaces: Iterable[Iface], counters: Mapping[str, Counters]) -> str:
    """`netstat -ibn`: each interface's `<Link#N>` row with its MAC, then a row per address,
    every row with the interface's counters."""
    out = [INTERFACE_HEADER]
    for iface in sorted(ifaces, key=lambda i: i.index):
        counted = counters.get(iface.name, Counters())
        out.append(_interface_row(iface, _link_place(iface), counted, True))
        for address in sorted(iface.addresses, key=lambda a: _listed_at(iface, a)):
            out.append(_interface_row(iface, _address_place(iface, address), counted, False))
    return "".join(out)


def hardware_ports(ports: Iterable[Port]) -> str:
    """`networksetup -listallhardwareports`."""
    out = "\n"
    for port in ports:
        out += (
            f"Hardware Port: {port.name}\nDevice: {port.device}\nEthernet Address: {port.mac}\n\n"
        )
    return out + "VLAN Configurations\n===================\n\n"


def thunderbolt(buses: Iterable[Bus], machine: str, model: str = "Mac16,11") -> str:
    """`system_profiler SPThunderboltDataType -json` (NSJSONSerialization: keys sorted, two
    spaces, `" : "`), a bus per receptacle, the highest first; a cabled one has the far Mac
    in its `_items` and its link speed (`40 Gb/s`), an empty one `Up to ...`."""
    items = []
    for n, bus in sorted(enumerate(buses), key=lambda pair: -pair[0]):
        cabled = bus.far is not None
        idle = "Up to 120 Gb/s" if bus.speed_gbps > 40 else "Up to 40 Gb/s"
        receptacle = {
            "current_speed_key": f"{bus.speed_gbps} Gb/s" if cabled else idle,
            "link_status_key": "0x2" if cabled else "0x100",
            "receptacle_id_key": str(bus.receptacle),
            "receptacle_status_key": "receptacle_connected"
            if cabled
            else "receptacle_no_devices_connected",
        }
        if cabled:  # every cabled receptacle of the real captures has it (an idle one rarely)
            receptacle["micro_version_key"] = "0.0.0"
        entry: dict[str, object] = {
            "_name": f"thunderboltusb4_bus_{n}",
            "device_name_key": machine,
            "domain_uuid_key": bus.domain_uuid,
            "receptacle_1_tag": receptacle,
            "route_string_key": "0",
            "switch_uid_key": f"0x05AC{bus.domain_uuid.replace('-', '')[:11].upper()}{n:X}",
            "vendor_name_key": "Apple Inc.",
        }
        if bus.far is not None:
            entry["_items"] = [
                {
                    "_name": bus.far_name,
                    "device_id_key": "0xA",
                    "device_name_key": model,
                    "domain_uuid_key": bus.far,
                    "services_title": [
                        {
                            "_name": "service_ip",
                            "protocol_id_key": 1,
                            "protocol_revision_key": 1,
                            "protocol_version_key": 1,
                            "service_uuid_key": "066216C9-46DB-48B5-A472-768F7EA51471",
                        }
                    ],
                    "vendor_id_key": "0x0A27",
                    "vendor_name_key": "Apple Inc.",
                }
            ]
        items.append(entry)
    text = json.dumps(
        {"SPThunderboltDataType": items}, indent=2, separators=(",", " : "), sort_keys=True
    )
    return text + "\n"


def sysctl_set(name: str, before: str, after: str) -> str:
    """`sysctl -w name=value`: the change, as macOS prints it."""
    return f"{name}: {before} -> {after}\n"


FIREWALL_OFF = "Firewall is disabled. (State = 0)\n"  # --getglobalstate, macOS 13 to 26
BLOCK_ALL_OFF = "Firewall has block all state set to disabled.\n"  # --getblockall, 14 and later


# RDMA over Thunderbolt (docs/macos.md, "Where the formats come from"): `rdma_ctl status`
# prints one word (mlx #3777), `sw_vers -productVersion` the version, and `ibv_devices`
# rdma-core's table (ibv_devices.c: a tab after each 16-wide name; TN3205, macOS 26.2).
def rdma_ctl_status(enabled: bool) -> str:
    return "enabled\n" if enabled else "disabled\n"


def ibv_devices(devices: Iterable[tuple[str, str]]) -> str:
    """`ibv_devices`: (name, node GUID as 16 hex digits) each; the header alone when none."""
    out = f"    {'device':<16}\t   node GUID\n    {'------':<16}\t{'-' * 16}\n"
    return out + "".join(f"    {name:<16}\t{guid}\n" for name, guid in devices)
