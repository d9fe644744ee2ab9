"""Mesh address arithmetic: node ids, node ranges, interface addresses, stale detection.

Pure: no I/O. The contract (DESIGN.md "Addressing"):
mesh prefix fde0:20c6:1fa7::/48, node range fde0:20c6:1fa7:ffff:<node id, 48 bits>:0/112,
interface address = node range | n with n in 1..65534, prefix length 128;
node address = node range | 0, on the loopback interface: the machine's one stable address.
"""

from __future__ import annotations

import ipaddress
import secrets
from ipaddress import IPv6Address, IPv6Network

MESH_PREFIX = IPv6Network("fde0:20c6:1fa7::/48")
NODE_SUBNET = IPv6Network("fde0:20c6:1fa7:ffff::/64")
NODE_ID_BITS = 48
# n = 0 is the range's own network address; 65535 is kept free as in the original daemon.
FIRST_INDEX = 1
LAST_INDEX = 65534


def parse_node_id(text: str) -> int:
    """Parse a node id written as 12 hex digits (an optional `0x` is accepted).

    Raises ValueError with a message that names the problem.
    """
    digits = text.strip().lower().removeprefix("0x")
    if len(digits) != NODE_ID_BITS // 4 or any(c not in "0123456789abcdef" for c in digits):
        raise ValueError(f"node id must be 12 hex digits (48 bits), got {text!r}")
    value = int(digits, 16)
    if value == RESERVED_NODE_ID:
        raise ReservedNodeId(
            f"node id {digits} is reserved: its node address would be "
            f"{NODE_SUBNET.network_address}, the subnet-router anycast address of {NODE_SUBNET}"
        )
    return value


class ReservedNodeId(ValueError):
    """A node id no node may have (all zeros)."""


# Node id 0 would give the node address fde0:20c6:1fa7:ffff::, the /64's subnet-router
# anycast address (RFC 4291 2.6.1), which routers answer for: never a node's.
RESERVED_NODE_ID = 0


def format_node_id(node_id: int) -> str:
    """The canonical spelling: 12 lowercase hex digits."""
    return f"{node_id:012x}"


def random_node_id() -> int:
    while True:
        value = secrets.randbits(NODE_ID_BITS)  # the kernel's CSPRNG
        if value != RESERVED_NODE_ID:
            return value


def node_range(node_id: int) -> IPv6Network:
    """The /112 that holds every address of this node."""
    if not 0 <= node_id < 1 << NODE_ID_BITS:
        raise ValueError(f"node id out of range: {node_id:#x}")
    base = int(NODE_SUBNET.network_address) | (node_id << 16)
    return IPv6Network((base, 112))


def node_address(node_id: int) -> IPv6Address:
    """The node's own address (range | 0), held on loopback while the mesh runs."""
    return node_range(node_id).network_address


def node_id_of(address: IPv6Address) -> int | None:
    """The node whose range holds `address`, or None outside the node subnet."""
    if address not in NODE_SUBNET:
        return None
    return (int(address) >> 16) & ((1 << NODE_ID_BITS) - 1)


def interface_address(node_id: int, index: int) -> IPv6Address:
    """Address number `index` (1..65534) of the node's range."""
    if not FIRST_INDEX <= index <= LAST_INDEX:
        raise ValueError(f"interface index out of range: {index}")
    return node_range(node_id).network_address + index


def index_in_range(node_id: int, address: IPv6Address) -> int | None:
    """The index n of `address` if it is a usable interface address of this node, else None."""
    if address not in node_range(node_id):
        return None
    index = int(address) & 0xFFFF
    return index if FIRST_INDEX <= index <= LAST_INDEX else None


def is_mesh_address(address: IPv6Address) -> bool:
    return address in MESH_PREFIX


def is_stale(node_id: int, address: IPv6Address) -> bool:
    """In the mesh /48 but not in this node's range: left by an earlier id or another tool."""
    return address in MESH_PREFIX and address not in node_range(node_id)


def owner_of(address: IPv6Address | IPv6Network) -> int | None:
    """The node id whose range holds `address` (or the whole of a prefix), if any."""
    net = ipaddress.ip_network(address)
    if not isinstance(net, IPv6Network) or net.prefixlen < 112 or not net.subnet_of(NODE_SUBNET):
        return None
    return (int(net.network_address) >> 16) & ((1 << NODE_ID_BITS) - 1)


def next_free_index(taken: set[int]) -> int:
    """The lowest index not in `taken`. Raises ValueError when the range is full."""
    for index in range(FIRST_INDEX, LAST_INDEX + 1):
        if index not in taken:
            return index
    raise ValueError("all 65534 interface addresses of the node range are in use")
