"""What the daemon knows about the machine's links, and which of them the mesh uses.

Pure: the links read at one moment are a value (`Links`), built by a platform backend
(daemon/links/) and compared here.
Events are triggers, not truth: a backend re-reads everything, and `diff` says what changed.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from ipaddress import IPv4Address, IPv4Interface, IPv6Address

ARPHRD_ETHER = 1
ARPHRD_LOOPBACK = 772
LOOPBACK_NAMES = ("lo", "lo0")  # Linux, macOS
# Link kinds that are never physical, even when their type is Ethernet.
VIRTUAL_KINDS = frozenset(
    {
        "bridge",
        "bond",
        "vlan",
        "macvlan",
        "macvtap",
        "ipvlan",
        "veth",
        "vxlan",
        "dummy",
        "tun",
        "tap",
        "team",
        "wireguard",
        "geneve",
        "vrf",
        "gre",
        "gretap",
        "ip6gre",
        "ip6tnl",
    }
)
THUNDERBOLT_DRIVER = "thunderbolt-net"


@dataclass(frozen=True)
class Link:
    """One network link as the kernel reports it."""

    name: str
    index: int
    arp_type: int = ARPHRD_ETHER
    kind: str | None = None  # netlink link kind ("veth", "bridge"); None for hardware
    has_device: bool = False  # backed by a device (sysfs `device` link)
    wireless: bool = False
    driver: str | None = None
    master: int | None = None  # index of the bridge/bond it is enslaved to
    up: bool = False  # administratively up (IFF_UP)
    # A live far end (macOS `status: active`: a Mac keeps a port up with no cable in it);
    # None where the backend does not say (Linux: a pulled cable takes the link down).
    carrier: bool | None = None
    link_local: bool = False  # holds a usable (not tentative) fe80::/10 address
    addresses: frozenset[IPv6Address] = field(default_factory=frozenset)  # non-link-local
    # Those of `addresses` that are valid but not preferred as a source (RFC 6724).
    deprecated: frozenset[IPv6Address] = field(default_factory=frozenset)
    addresses_v4: frozenset[IPv4Interface] = field(default_factory=frozenset)
    speed_mbps: int | None = None  # as the kernel reports it; None when it does not say
    mtu: int | None = None  # bytes; None where the platform does not say
    max_mtu: int | None = None  # the largest the driver takes (Linux IFLA_MAX_MTU)

    @property
    def is_loopback(self) -> bool:
        return self.arp_type == ARPHRD_LOOPBACK or self.name in LOOPBACK_NAMES

    @property
    def is_thunderbolt(self) -> bool:
        return self.driver == THUNDERBOLT_DRIVER or self.name.startswith("thunderbolt")

    @property
    def is_physical(self) -> bool:
        """A wired link of real hardware: what the mesh uses when no --interface is given."""
        if self.is_thunderbolt:
            return self.arp_type == ARPHRD_ETHER and self.master is None
        return (
            self.arp_type == ARPHRD_ETHER
            and self.has_device
            and self.kind is None
            and not self.wireless
            and self.master is None
        )

    @property
    def category(self) -> str:
        """`thunderbolt`, `ethernet` or `other`, as `status` reports it."""
        if self.is_thunderbolt:
            return "thunderbolt"
        if self.is_physical:
            return "ethernet"
        return "other"


Links = Mapping[str, Link]


@dataclass(frozen=True)
class AddressChange:
    """One mesh address to add to, or remove from, one link."""

    interface: str
    index: int  # the link's kernel index
    address: IPv6Address | IPv4Address
    prefixlen: int = 128
    # IPv6: valid but not preferred as a source (preferred lifetime 0), so that connections
    # leave from the node address and outlive the link (DESIGN.md "Source address").
    deprecated: bool = False
    # IPv4: a cable address the loopback holds while its cable is out (its detour): not the
    # node address, so not labelled as that is (platform.NODE_ADDRESS_LABEL)
    held: bool = False


@dataclass(frozen=True)
class Selector:
    """Which links the mesh may use: `--interface` globs (exactly those), else physical links;
    `--exclude` globs always win."""

    interface: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def selects(self, link: Link) -> bool:
        if any(fnmatch.fnmatchcase(link.name, pattern) for pattern in self.exclude):
            return False
        if self.interface:
            return any(fnmatch.fnmatchcase(link.name, pattern) for pattern in self.interface)
        return link.is_physical

    def usable(self, link: Link) -> bool:
        """Selected, up, and with a link-local address babeld can send from."""
        return self.selects(link) and link.up and link.link_local


def selected_links(links: Links, selector: Selector) -> list[Link]:
    return sorted((ln for ln in links.values() if selector.selects(ln)), key=lambda ln: ln.name)


def to_bring_up(
    links: Links, selector: Selector, globs: tuple[str, ...], tried: set[tuple[str, int]]
) -> list[Link]:
    """Links to bring up now: selected, down, Thunderbolt or matching a `--bring-up` glob,
    and not tried before under the same name and index (one set down later stays down; a
    cable plugged again is a new link)."""
    return [
        link
        for link in selected_links(links, selector)
        if not link.up
        and not link.is_loopback
        and (link.name, link.index) not in tried
        and (link.is_thunderbolt or any(fnmatch.fnmatchcase(link.name, g) for g in globs))
    ]


def usable_names(links: Links, selector: Selector) -> set[str]:
    return {name for name, link in links.items() if selector.usable(link)}


@dataclass(frozen=True)
class LinkDiff:
    """What changed between two reads of the links, for acting and for the log line that
    says why."""

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (name, fields that changed)

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.changed)

    def reasons(self) -> list[str]:
        out = [f"{name} appeared" for name in self.added]
        out += [f"{name} disappeared" for name in self.removed]
        out += [f"{name}: {', '.join(fields)} changed" for name, fields in self.changed]
        return out


_COMPARED = (
    "index",
    "up",
    "carrier",
    "link_local",
    "addresses",
    "deprecated",
    "addresses_v4",
    "master",
    "kind",
    "arp_type",
    "speed_mbps",
)


def keep_speeds(new: Links, old: Links) -> dict[str, Link]:
    """`new`, each link that stopped saying its speed (a link without carrier reports none)
    keeping the one it said before, so that its cost stays its own while it is down."""
    out = dict(new)
    for name, link in new.items():
        was = old.get(name)
        if link.speed_mbps is None and was and was.index == link.index and was.speed_mbps:
            out[name] = replace(link, speed_mbps=was.speed_mbps)
    return out


def diff(old: Links, new: Links) -> LinkDiff:
    changed = []
    for name in sorted(old.keys() & new.keys()):
        fields = tuple(f for f in _COMPARED if getattr(old[name], f) != getattr(new[name], f))
        if fields:
            changed.append((name, fields))
    return LinkDiff(
        added=tuple(sorted(new.keys() - old.keys())),
        removed=tuple(sorted(old.keys() - new.keys())),
        changed=tuple(changed),
    )
