"""IPv4 on this node (DESIGN.md "IPv4"): the prefix, this node's /32 and which attempt it
is, the cable /31s from babeld's neighbours, the clash with the host's own routes, and the
record of every IPv4 address babblerd added (the prefix is shared private space: only what
is recorded here is ever removed).

Lean (standard library and core only): the early start reads the node address from here.
The address math is core/ipv4.py's; this module keeps its state files:
- `ipv4-node`: `<prefix> <node id> <attempt>` (the attempt a collision moved us to);
- `ipv4-addresses`: `<interface> <address>/<length>` a line, what was added and not yet
  seen removed (written before each add, so a crash leaves nothing unrecorded).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv4Interface, IPv4Network, IPv6Address
from pathlib import Path

from babbler.core.addressing import format_node_id
from babbler.core.ipv4 import (
    Cable,
    HostRoute,
    cable_ends,
    cable_half,
    cable_subnets,
    clash,
    node_address_v4,
    node_half,
)
from babbler.core.links import Links, Selector
from babbler.daemon.nodeid import write_state_file

NODE_FILE = "ipv4-node"
ADDRESSES_FILE = "ipv4-addresses"

Recorded = frozenset[tuple[str, IPv4Interface]]


def read_attempt(state_dir: Path, prefix: IPv4Network, node_id: int) -> int:
    """The attempt kept for this prefix and node id; 0 when none is (or another was kept)."""
    try:
        words = (state_dir / NODE_FILE).read_text(encoding="ascii").split()
    except (OSError, UnicodeDecodeError):
        return 0
    if len(words) == 3 and words[:2] == [str(prefix), format_node_id(node_id)]:
        return int(words[2]) if words[2].isdigit() else 0
    return 0


def read_recorded(state_dir: Path) -> Recorded:
    try:
        lines = (state_dir / ADDRESSES_FILE).read_text(encoding="ascii").splitlines()
    except (OSError, UnicodeDecodeError):
        return frozenset()
    out = set()
    for line in lines:
        name, _, address = line.partition(" ")
        try:
            out.add((name, IPv4Interface(address)))
        except ValueError:
            continue
    return frozenset(out)


@dataclass(frozen=True)
class Cabled:
    """One cable address this node holds."""

    interface: str
    address: IPv4Address
    peer: IPv4Address
    subnet: IPv4Network
    far: IPv6Address  # the far end's link-local (babeld's neighbour, or the probe's find)


@dataclass
class Ipv4:
    """IPv4's state on this node. `prefix` None: IPv4 is off (`--ipv4-prefix off`)."""

    prefix: IPv4Network | None
    state_dir: Path
    node_id: int
    attempt: int = 0
    problem: str | None = None  # why IPv4 is refused or withdrawn (a clash); None: it runs
    recorded: Recorded = field(default_factory=frozenset)

    @classmethod
    def load(cls, prefix: IPv4Network | None, state_dir: Path, node_id: int) -> Ipv4:
        attempt = read_attempt(state_dir, prefix, node_id) if prefix is not None else 0
        return cls(prefix, state_dir, node_id, attempt, None, read_recorded(state_dir))

    @property
    def on(self) -> bool:
        return self.prefix is not None and self.problem is None

    @property
    def node_address(self) -> IPv4Address | None:
        if self.prefix is None or self.problem is not None:
            return None
        return node_address_v4(self.prefix, self.node_id, self.attempt)

    def babeld_filters(self, detours_from: str | None = None) -> list[str]:
        """babeld's IPv4 lines (-C): announce the node half (the node address) and, with
        `detours_from` (the loopback's name), the cable addresses held there while their
        cable is out, never one on its cable; learn the prefix's host routes (/32s) and no
        other IPv4 route, install others' with our node address as their source; with a
        clash, install none of the prefix."""
        if self.prefix is None:
            return []
        learn = f"in ip {self.prefix} ge 32 allow"
        if self.problem is not None or self.node_address is None:
            return [learn, f"install ip {self.prefix} deny"]
        held = [f"redistribute local ip {cable_half(self.prefix)} if {detours_from}"]
        return [
            f"redistribute local ip {node_half(self.prefix)}",
            *(held if detours_from else []),
            learn,
            f"install ip {self.prefix} pref-src {self.node_address}",
        ]

    def renumbered(self, node_id: int) -> None:
        """A new node id: its own first attempt."""
        self.node_id, self.attempt = node_id, 0

    def move(self) -> str | None:
        """Another node with a smaller node id holds our node address: take the next
        attempt and keep it. Returns None, or why it could not be kept."""
        assert self.prefix is not None
        self.attempt += 1
        text = f"{self.prefix} {format_node_id(self.node_id)} {self.attempt}\n"
        return write_state_file(self.state_dir, NODE_FILE, text)

    def record(self, entries: Iterable[tuple[str, IPv4Interface]]) -> str | None:
        """Keep `entries` as the addresses babblerd added. Returns None, or why not."""
        self.recorded = frozenset(entries)
        text = "".join(f"{name} {address}\n" for name, address in sorted(self.recorded))
        return write_state_file(self.state_dir, ADDRESSES_FILE, text)

    def cables(
        self, interfaces: Mapping[str, IPv6Address], neighbours: Iterable[tuple[str, IPv6Address]]
    ) -> list[Cabled]:
        """This node's cable addresses: one /31 per neighbour babeld has on a link whose own
        link-local babeld reports (`interfaces`: name -> link-local)."""
        if not self.on or self.prefix is None:
            return []
        cables = [
            Cable(name, interfaces[name], address)
            for name, address in neighbours
            if name in interfaces
        ]
        out = []
        for cable, subnet in sorted(cable_subnets(self.prefix, cables).items()):
            mine, theirs = cable_ends(subnet, cable)
            out.append(Cabled(cable.interface, mine, theirs, subnet, cable.theirs))
        return out

    def wanted(
        self,
        links: Links,
        selector: Selector,
        active: bool,
        cables: Iterable[Cabled],
        out: Iterable[Cabled] = (),
    ) -> dict[str, set[IPv4Interface]]:
        """Interface name -> the IPv4 addresses it should hold now. `out`: cables held
        while pulled, whose addresses the loopback holds as /32s (their detour)."""
        wanted: dict[str, set[IPv4Interface]] = {}
        node = self.node_address
        if not active or node is None:
            return wanted
        for name, link in links.items():
            if link.is_loopback:
                held = {IPv4Interface(f"{cable.address}/32") for cable in out}
                wanted.setdefault(name, set()).update({IPv4Interface(f"{node}/32"), *held})
        for cable in cables:
            used = links.get(cable.interface)
            if used is not None and selector.usable(used):
                wanted.setdefault(cable.interface, set()).add(IPv4Interface(f"{cable.address}/31"))
        return wanted

    def check(self, host: Iterable[HostRoute]) -> str | None:
        """Set and return `problem`: a host route in the prefix that is not ours. Ours are
        the connected routes of the addresses we recorded: every address of ours is recorded
        before it is added, so no route of ours comes from an unrecorded one."""
        if self.prefix is None:
            self.problem = None
            return None
        found = clash(self.prefix, host, [address.network for _, address in self.recorded])
        self.problem = None if found is None else f"{found.what} overlaps {self.prefix}"
        return self.problem
