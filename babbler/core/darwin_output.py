"""macOS command outputs in, facts out: `ifconfig`, `networksetup -listallhardwareports`,
`ifconfig bridgeN`, `netstat -rn`, `system_profiler SPThunderboltDataType -json`,
socketfilterfw, netifaces' entries; which hardware port is a cable; one interface as a
`Link`; ifconfig's line for an address change. Pure: babblerd's macOS backend
(daemon/links/darwin.py) and `babblerctl doctor` (ctl/doctor.py) run the commands and both
read them here. Tested on Linux with transcribed outputs (typed in macOS's format, not
captured on a Mac: tests/unit/data/darwin/README.md)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Interface, IPv4Network, IPv6Address, IPv6Network
from typing import Any

from babbler.core.addressing import MESH_PREFIX
from babbler.core.ipv4 import HostRoute
from babbler.core.links import ARPHRD_ETHER, AddressChange, Link

# Hardware ports that are not cables between machines.
WIFI_PORTS = frozenset({"Wi-Fi", "AirPort"})
UNWIRED_PORT_WORDS = ("Bluetooth", "iPhone", "iPad", "T2", "iBridge")
THUNDERBOLT_PORT = re.compile(r"^Thunderbolt \d+$")  # not "Thunderbolt Bridge"
# The largest MTU macOS runs IP over Thunderbolt at (its Network settings offer 9000 on
# Thunderbolt ports; exo #2188, a TB4 link measured 5.3 -> 16.4 Gbit/s at 9000).
THUNDERBOLT_MAX_MTU = 9000
# <netinet6/in6_var.h>: an address in these states cannot be sent from yet (or ever).
IN6_IFF_TENTATIVE = 0x02
IN6_IFF_DUPLICATED = 0x04
IN6_IFF_DETACHED = 0x08
IN6_IFF_DEPRECATED = 0x10
UNUSABLE = IN6_IFF_TENTATIVE | IN6_IFF_DUPLICATED | IN6_IFF_DETACHED
RTF_PROTO2_FLAG = "2"  # babeld's kernel_socket.c marks its routes RTF_PROTO2


def is_unwired_port(port: str | None) -> bool:
    """A port with a device that is never a cable between machines (Bluetooth, a phone...)."""
    return port is not None and any(word in port for word in UNWIRED_PORT_WORDS)


def is_wired_port(port: str | None) -> bool:
    """A hardware port that can be a cable between machines: not Wi-Fi, not unwired."""
    return port is not None and port not in WIFI_PORTS and not is_unwired_port(port)


def is_thunderbolt_port(port: str | None) -> bool:
    """`Thunderbolt N` (not the `Thunderbolt Bridge` that groups them)."""
    return port is not None and THUNDERBOLT_PORT.match(port) is not None


def hardware_ports(text: str) -> dict[str, str]:
    """`networksetup -listallhardwareports` -> {device: port name}."""
    ports: dict[str, str] = {}
    port = None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key == "Hardware Port":
            port = value.strip()
        elif key == "Device" and port is not None:
            ports[value.strip()] = port
            port = None
    return ports


def bridge_members(text: str) -> set[str]:
    """`ifconfig bridgeN` -> the names of its member interfaces."""
    return {m.group(1) for m in re.finditer(r"^\s+member: (\S+)", text, re.MULTILINE)}


def names(text: str) -> list[str]:
    """`ifconfig -l` (or `-l -u`) -> interface names."""
    return text.split()


def babel_routes(netstat_text: str, prefix: IPv6Network = MESH_PREFIX) -> list[str]:
    """`netstat -rn -f inet6` -> destinations of babeld's routes (RTF_PROTO2) in `prefix`."""
    out = []
    for line in netstat_text.splitlines():
        fields = line.split()
        if len(fields) < 3 or RTF_PROTO2_FLAG not in fields[2]:
            continue
        destination = fields[0]
        host = destination.split("/")[0].split("%")[0]
        try:
            if IPv6Address(host) in prefix:
                out.append(destination)
        except ValueError:
            continue  # "default", a header line, an IPv4 table
    return out


def babel_routes_v4(netstat_text: str) -> list[str]:
    """`netstat -rn -f inet` -> destinations of babeld's routes (RTF_PROTO2)."""
    return [
        fields[0]
        for fields in (line.split() for line in netstat_text.splitlines())
        if len(fields) >= 3 and RTF_PROTO2_FLAG in fields[2] and fields[0][:1].isdigit()
    ]


def address_facts(
    entries: Iterable[dict[str, Any]],
) -> tuple[bool, frozenset[IPv6Address], frozenset[IPv6Address]]:
    """netifaces' AF_INET6 entries -> (has a usable link-local, the other addresses, those of
    them that are deprecated)."""
    link_local = False
    addresses, deprecated = set(), set()
    for entry in entries:
        try:
            address = IPv6Address(str(entry.get("addr", "")).split("%")[0])
        except ValueError:
            continue
        flags = int(entry.get("flags", 0))
        if address.is_link_local:
            link_local = link_local or not flags & UNUSABLE
        else:
            addresses.add(address)
            if flags & IN6_IFF_DEPRECATED:
                deprecated.add(address)
    return link_local, frozenset(addresses), frozenset(deprecated)


def ipv4_facts(entries: Iterable[dict[str, Any]]) -> frozenset[IPv4Interface]:
    """netifaces' AF_INET entries -> the addresses with their prefix lengths."""
    out = set()
    for entry in entries:
        try:
            out.add(IPv4Interface(f"{entry['addr']}/{entry.get('netmask') or '255.255.255.255'}"))
        except (KeyError, ValueError):
            continue
    return frozenset(out)


def inet_routes(netstat_text: str) -> list[HostRoute]:
    """`netstat -rn -f inet` -> the host's IPv4 routes, babeld's (RTF_PROTO2) left out.
    netstat shortens destinations: `10.77/16`, `192.168.1` (a classful /24), `127`.

    A row inside a network an interface reaches on its link (gateway `link#N`), on that same
    interface, is left out too: the network's row stands for it. Those are the Mac's own
    addresses (`10.77.200.4/32  link#9  UCS  en4  !`), its neighbours' ARP entries (`UHLW`)
    and its gateway's scoped /32: read alone, babblerd's own cable address and the far end's
    would be a clash with the mesh prefix, not the /31 of babblerd's that holds them."""
    rows: list[tuple[IPv4Network, str, str]] = []  # (destination, gateway, interface)
    netif = 3  # the Netif column (older netstat had Refs and Use before it: the header says)
    for line in netstat_text.splitlines():
        fields = line.split()
        if fields[:1] == ["Destination"] and "Netif" in fields:
            netif = fields.index("Netif")
        if len(fields) < 3 or fields[0] == "default" or RTF_PROTO2_FLAG in fields[2]:
            continue
        head, _, length = fields[0].partition("/")
        octets = head.split(".")
        if not all(o.isdigit() for o in octets) or len(octets) > 4:
            continue  # the header, "link#4" gateways in the first column never come here
        bits = int(length) if length.isdigit() else (32 if "H" in fields[2] else 8 * len(octets))
        try:
            network = IPv4Network(f"{'.'.join(octets + ['0'] * (4 - len(octets)))}/{bits}", False)
        except ValueError:
            continue
        rows.append((network, fields[1], fields[netif] if len(fields) > netif else ""))
    on_link = [(network, name) for network, gateway, name in rows if gateway.startswith("link#")]
    return [
        HostRoute(network, f"route {network} via {gateway}", name)
        for network, gateway, name in rows
        if not any(
            network != wider and network.subnet_of(wider) and name == there
            for wider, there in on_link
        )
    ]


# `netstat -ibn`'s columns of a link's counters (network_cmds' if.c), and the names status
# gives them (Linux's sysfs names: host/sysfs.py STATISTICS).
NETSTAT_COUNTERS = {
    "Ipkts": "rx_packets",
    "Ibytes": "rx_bytes",
    "Opkts": "tx_packets",
    "Obytes": "tx_bytes",
}


def link_counters(netstat_text: str) -> dict[str, dict[str, int]]:
    """`netstat -ibn` -> each interface's counters {rx_bytes, tx_bytes, rx_packets,
    tx_packets}. netstat prints a row per address of an interface, each repeating the
    interface's counters; the `<Link#N>` row is the interface's own (its Address column,
    the MAC, is empty on lo0, utun and the like), and a name ends in `*` while the interface
    is down. The numbers are read from the end of the row, where the header puts them: the
    Network and Address columns may be empty or run together when an address is long.
    Rows that do not read as numbers are left out, never guessed."""
    columns: list[str] = []
    found: dict[str, dict[str, int]] = {}
    for line in netstat_text.splitlines():
        fields = line.split()
        if fields[:2] == ["Name", "Mtu"]:
            columns = fields[fields.index("Address") + 1 :] if "Address" in fields else []
            continue
        if not columns or len(fields) < 3 + len(columns) or not fields[2].startswith("<Link#"):
            continue
        values = dict(zip(columns, fields[-len(columns) :], strict=True))
        said = {key: values.get(column, "") for column, key in NETSTAT_COUNTERS.items()}
        if all(v.isascii() and v.isdigit() for v in said.values()):
            found.setdefault(fields[0].removesuffix("*"), {k: int(v) for k, v in said.items()})
    return found


MEDIA_SPEED = re.compile(r"\((\d+(?:\.\d+)?)(G?)base", re.IGNORECASE)


@dataclass(frozen=True)
class IfconfigState:
    """One interface in `ifconfig`'s full output, as the doctor reads it."""

    up: bool
    active: bool | None  # `status: active` (a cable with a live far end); None: no status line
    mtu: int | None
    link_local: bool  # an fe80:: address that is not tentative, duplicated or detached
    speed_mbps: int | None = None  # from the `media:` line, when it names a speed


def ifconfig_blocks(ifconfig_text: str) -> dict[str, list[str]]:
    """`ifconfig` (all interfaces) -> each interface's lines, in the order it lists them
    (the order of `ifconfig -l`)."""
    blocks: dict[str, list[str]] = {}
    for line in ifconfig_text.splitlines():
        header = IFCONFIG_HEADER.match(line)
        if header:
            blocks[header.group(1)] = [line]
        elif blocks and line[:1].isspace():
            blocks[next(reversed(blocks))].append(line)
    return blocks


def ifconfig_states(ifconfig_text: str) -> dict[str, IfconfigState]:
    """`ifconfig` (all interfaces) -> each interface's state."""
    blocks = ifconfig_blocks(ifconfig_text)
    return {name: ifconfig_state(lines) for name, lines in blocks.items()}


IFCONFIG_HEADER = re.compile(r"^(\S+): flags=\w+<([^>]*)>(?: mtu (\d+))?")


def ifconfig_state(lines: list[str]) -> IfconfigState:
    """One interface's block of `ifconfig` (its header line first) -> its state."""
    header = IFCONFIG_HEADER.match(lines[0])
    assert header is not None
    active, link_local, speed = None, False, None
    for line in lines[1:]:
        words = line.split()
        found = MEDIA_SPEED.search(line) if words[:1] == ["media:"] else None
        if found:
            speed = round(float(found.group(1)) * (1000 if found.group(2) else 1))
        elif words[:1] == ["status:"] and len(words) > 1:
            active = words[1] == "active"
        elif len(words) > 1 and words[0] == "inet6" and words[1].lower().startswith("fe80:"):
            link_local = link_local or not {"tentative", "duplicated", "detached"} & set(words)
    mtu = header.group(3)
    return IfconfigState(
        up="UP" in header.group(2).split(","),
        active=active,
        mtu=int(mtu) if mtu else None,
        link_local=link_local,
        speed_mbps=speed,
    )


def thunderbolt_cables(profile_json: str, ports: dict[str, str]) -> dict[str, bool]:
    """`system_profiler SPThunderboltDataType -json` with the hardware ports -> each
    Thunderbolt port's device and whether another machine is at its far end (a connected
    item that is a Thunderbolt domain of its own, as mlx's distributed config reads it)."""
    try:
        buses = json.loads(profile_json).get("SPThunderboltDataType", [])
    except (ValueError, AttributeError):
        return {}
    by_port = {port: device for device, port in ports.items()}
    out: dict[str, bool] = {}
    for bus in buses if isinstance(buses, list) else []:
        if not isinstance(bus, dict) or "domain_uuid_key" not in bus:
            continue
        receptacle = bus.get("receptacle_1_tag")
        tag = receptacle.get("receptacle_id_key") if isinstance(receptacle, dict) else None
        device = by_port.get(f"Thunderbolt {tag}")
        if device is None:
            continue
        items = bus.get("_items", [])
        items = items if isinstance(items, list) else []
        out[device] = any(isinstance(i, dict) and "domain_uuid_key" in i for i in items)
    return out


def firewall_state(global_state: str, block_all: str = "") -> str | None:
    """socketfilterfw's `--getglobalstate` (and `--getblockall`) -> on, off or block-all."""
    if "block all" in block_all.lower() and "enabled" in block_all.lower():
        return "block-all"
    text = global_state.lower()
    if "state = 2" in text:
        return "block-all"  # 2: essential services only
    if "enabled" in text or "state = 1" in text:
        return "on"
    if "disabled" in text or "state = 0" in text:
        return "off"
    return None


def build_link(
    name: str,
    index: int,
    *,
    port: str | None,
    bridge_index: int | None,
    up: bool,
    inet6: Iterable[dict[str, Any]],
    carrier: bool | None = None,
    speed_mbps: int | None = None,
    inet: Iterable[dict[str, Any]] = (),
    mtu: int | None = None,
) -> Link:
    """One macOS interface as the platform-neutral Link the selection rules read."""
    link_local, addresses, deprecated = address_facts(inet6)
    is_en = name.startswith("en")
    unwired = is_unwired_port(port)
    thunderbolt = is_thunderbolt_port(port)
    return Link(
        name=name,
        index=index,
        arp_type=ARPHRD_ETHER if is_en or name.startswith("bridge") else 0,
        kind="bridge" if name.startswith("bridge") else None,
        # an en* no hardware port names is none (a T2 Mac's link to its T2 chip, en5 or so,
        # is listed by ifconfig, not networksetup): never a cable
        has_device=is_en and port is not None and not unwired,
        wireless=port in WIFI_PORTS,
        # The category Linux's thunderbolt-net driver gives ("thunderbolt" in status).
        driver="thunderbolt-net" if thunderbolt else None,
        master=bridge_index,
        up=up,
        carrier=carrier,
        link_local=link_local,
        addresses=addresses,
        deprecated=deprecated,
        addresses_v4=ipv4_facts(inet),
        speed_mbps=speed_mbps,
        mtu=mtu,
        # ifconfig does not say a link's largest; only Thunderbolt's is known (core/mtu.py)
        max_mtu=THUNDERBOLT_MAX_MTU if thunderbolt else None,
    )


def address_command(change: AddressChange, verb: str) -> list[str]:
    """ifconfig's line for one change (`verb`: add or delete). IPv4 addresses are aliases;
    an IPv6 address that must not be a preferred source gets `pltime 0` (ifconfig(8); not
    run on a Mac here)."""
    where = f"{change.address}/{change.prefixlen}"
    if isinstance(change.address, IPv4Address):
        return ["ifconfig", change.interface, "inet", where, "alias" if verb == "add" else "-alias"]
    lifetime = ["pltime", "0"] if change.deprecated and verb == "add" else []
    return ["ifconfig", change.interface, "inet6", where, *lifetime, verb]
