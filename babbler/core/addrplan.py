"""Which mesh addresses should exist on which link, and what to add or remove to get there.

Pure. Rules (DESIGN.md "Addressing"):
- while the mesh is active, every usable link holds exactly one address of the node range,
  numbered n, and keeps that n for the life of the daemon (across down/up and re-creation),
  and the loopback link holds the node address (range | 0); a new n is random, so that two
  machines with one node id (a cloned disk) announce different link addresses and each
  sees the other's wherever they are (core/collision.py);
- on selected links and loopback, any other address inside the mesh /48 is removed (stale,
  e.g. the node address of a node id given up after a collision);
- on any link, addresses of the node's own range that are not wanted are removed (they are
  ours, for example left by a daemon that was killed);
- addresses outside the /48 are never touched;
- link addresses are not preferred as a source (IPv6 preferred lifetime 0), the node
  address is, so that what this node sends leaves from its node address;
- IPv4 (`plan_v4`): the node /32 on loopback and a /31 per cable; only addresses recorded
  as added by babblerd are ever removed (the IPv4 prefix is shared private space).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from ipaddress import IPv4Interface, IPv6Address

from babbler.core.addressing import (
    FIRST_INDEX,
    LAST_INDEX,
    index_in_range,
    interface_address,
    is_mesh_address,
    next_free_index,
    node_address,
    node_range,
)
from babbler.core.links import AddressChange, Links, Selector


@dataclass(frozen=True)
class AddressPlan:
    add: tuple[AddressChange, ...] = ()
    remove: tuple[AddressChange, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.add or self.remove)


def random_free_index(taken: set[int]) -> int:
    """A random index not in `taken`. With the lowest free one, two clones both numbered
    their one link 1: with two or more nodes between them neither ever saw a route into its
    range from the other (a 4-line: measured), so the collision stayed. Raises ValueError
    when the range is full."""
    if len(taken) > (LAST_INDEX - FIRST_INDEX) // 2:
        return next_free_index(taken)  # hardly ever: a random pick would take long
    while True:
        index = FIRST_INDEX + secrets.randbelow(LAST_INDEX - FIRST_INDEX + 1)
        if index not in taken:
            return index


@dataclass
class IndexBook:
    """Interface name -> n, kept for the life of the daemon. Adopts the n of an address a
    previous run left in our range, so that addresses stay stable across daemon restarts;
    else `pick` chooses (random_free_index)."""

    pick: Callable[[set[int]], int] = random_free_index
    by_name: dict[str, int] = field(default_factory=dict)

    def number(self, name: str, node_id: int, present: frozenset[IPv6Address]) -> int:
        self.adopt(name, node_id, present)
        if name not in self.by_name:
            self.by_name[name] = self.pick(set(self.by_name.values()))
        return self.by_name[name]

    def adopt(self, name: str, node_id: int, present: frozenset[IPv6Address]) -> None:
        """Keep the n of an address of our range that the link holds (a killed babblerd
        left it), if the link has none yet. Also while the mesh is idle, when that address
        is removed: the link gets the same one back when the mesh runs."""
        if name in self.by_name:
            return
        taken = set(self.by_name.values())
        for address in sorted(present):
            index = index_in_range(node_id, address)
            if index is not None and index not in taken:
                self.by_name[name] = index
                return

    def forget_all(self) -> None:
        """After a node id change the old numbers mean nothing."""
        self.by_name.clear()


def wanted_addresses(
    links: Links, selector: Selector, node_id: int, book: IndexBook, active: bool
) -> dict[str, IPv6Address]:
    """Interface name -> the one mesh address it should hold now (none while idle, when
    the numbers of addresses a previous run left are still noted)."""
    if not active:
        for name, link in links.items():
            if not link.is_loopback and selector.usable(link):
                book.adopt(name, node_id, link.addresses)
        return {}
    wanted = {}
    for name in sorted(links):
        link = links[name]
        if link.is_loopback:
            wanted[name] = node_address(node_id)
        elif selector.usable(link):
            n = book.number(name, node_id, link.addresses)
            wanted[name] = interface_address(node_id, n)
    return wanted


def plan(
    links: Links, selector: Selector, node_id: int, wanted: dict[str, IPv6Address]
) -> AddressPlan:
    """The additions and removals that turn `links` into `wanted`."""
    own = node_range(node_id)
    add, remove = [], []
    for name, link in sorted(links.items()):
        target = wanted.get(name)
        hidden = not link.is_loopback  # a link address: valid, never a preferred source
        if target is not None and (
            target not in link.addresses or (target in link.deprecated) != hidden
        ):
            add.append(AddressChange(name, link.index, target, deprecated=hidden))
        # Loopback is ours for the mesh prefix too: it holds the node address.
        selected = selector.selects(link) or link.is_loopback
        for address in sorted(link.addresses):
            if address == target or not is_mesh_address(address):
                continue
            if selected or address in own:
                remove.append(AddressChange(name, link.index, address))
    return AddressPlan(tuple(add), tuple(remove))


def plan_v4(
    links: Links,
    wanted: dict[str, set[IPv4Interface]],
    recorded: frozenset[tuple[str, IPv4Interface]],
) -> AddressPlan:
    """The IPv4 additions and removals that turn `links` into `wanted`: only addresses in
    `recorded` (added by babblerd, now or before a crash) are removed."""
    add, remove = [], []
    for name, addresses in sorted(wanted.items()):
        link = links.get(name)
        for address in sorted(addresses):
            if link is not None and address not in link.addresses_v4:
                add.append(AddressChange(name, link.index, address.ip, address.network.prefixlen))
    for name, address in sorted(recorded):
        link = links.get(name)
        if address in wanted.get(name, set()) or link is None:
            continue
        if address in link.addresses_v4:
            remove.append(AddressChange(name, link.index, address.ip, address.network.prefixlen))
    return AddressPlan(tuple(add), tuple(remove))
