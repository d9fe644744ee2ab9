"""IPv4 on the mesh (DESIGN.md "IPv4"), pure: the prefix's rules, each node's /32 node
address and each cable's /31, and whether the host's own routes and addresses clash.

The prefix's lower half holds node addresses, its upper half cable subnets. Both are
derived by hashing (SHA-256) so that every node computes the same answer with nobody asked:
a node address from the node id and an attempt number (a collision moves the node with the
larger node id to its next attempt), a cable's /31 from the pair of link-local addresses
of its two ends, ordered (the end with the lower link-local takes the even address).
Addresses whose last byte is 0 or 255 are skipped: some programs still take them for a
network or broadcast address.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network, IPv6Address, ip_network

from babbler.core.errors import ConfigError

# 10.77.0.0/16: private space (RFC 1918) that none of these use by default: Docker's
# address pools (172.17-31.0.0/16, 192.168.0.0/16 in /20s), AWS's default VPC
# (172.31.0.0/16), Azure's default VNet (10.0.0.0/16), GCP's auto-mode subnets
# (10.128.0.0/9), Kubernetes' usual pod and service ranges (10.244.0.0/16, 10.42.0.0/16,
# 10.43.0.0/16, 10.96.0.0/12), Tailscale (100.64.0.0/10, not RFC 1918 at all), and the
# home and office LANs that crowd 192.168.0-1.0/24 and 10.0-1.0.0/16. A host that uses it
# anyway is found by the clash check, and --ipv4-prefix picks another.
DEFAULT_PREFIX = IPv4Network("10.77.0.0/16")
PRIVATE = (IPv4Network("10.0.0.0/8"), IPv4Network("172.16.0.0/12"), IPv4Network("192.168.0.0/16"))
SHORTEST, LONGEST = 16, 22  # /22: 512 node addresses, 256 cables
ATTEMPTS = 64  # candidates tried before giving up (a full half; never seen in practice)


def parse_prefix(key: str, value: object) -> IPv4Network | None:
    """The `ipv4-prefix` setting: None for `off`, else a private /16 to /22. Raises
    ConfigError with one line."""
    if isinstance(value, str) and value.strip().lower() == "off":
        return None
    if not isinstance(value, str | IPv4Network):
        raise ConfigError(f"{key}: expected an IPv4 prefix like 10.77.0.0/16 or off, got {value!r}")
    try:
        network = ip_network(str(value).strip(), strict=True)
    except ValueError as error:
        raise ConfigError(f"{key}: {value!r} is not an IPv4 prefix ({error})") from None
    if not isinstance(network, IPv4Network):
        raise ConfigError(f"{key}: {value!r} is IPv6; the IPv4 prefix is like 10.77.0.0/16")
    if not any(network.subnet_of(space) for space in PRIVATE):
        raise ConfigError(
            f"{key}: {network} is not private space (RFC 1918: 10.0.0.0/8, 172.16.0.0/12, "
            "192.168.0.0/16)"
        )
    if not SHORTEST <= network.prefixlen <= LONGEST:
        raise ConfigError(f"{key}: {network} must be a /{SHORTEST} to a /{LONGEST}")
    return network


def node_half(prefix: IPv4Network) -> IPv4Network:
    return next(prefix.subnets(1))


def cable_half(prefix: IPv4Network) -> IPv4Network:
    return list(prefix.subnets(1))[1]


def _hash(*parts: object) -> int:
    text = "/".join(str(p) for p in parts).encode()
    return int.from_bytes(hashlib.sha256(text).digest()[:8], "big")


def _usable(address: IPv4Address) -> bool:
    return int(address) & 0xFF not in (0, 0xFF)


def node_address_v4(prefix: IPv4Network, node_id: int, attempt: int = 0) -> IPv4Address:
    """The node's /32 for this attempt: a hash of the node id into the lower half."""
    half = node_half(prefix)
    for extra in range(ATTEMPTS):
        address = half.network_address + _hash("node", node_id, attempt, extra) % half.num_addresses
        if _usable(address):
            return address
    raise ValueError(f"no usable node address in {half}")  # not with 2**9 or more to pick


@dataclass(frozen=True, order=True)
class Cable:
    """One cable as this node sees it: its link, and the two ends' link-local addresses."""

    interface: str
    mine: IPv6Address
    theirs: IPv6Address


def cable_subnet(prefix: IPv4Network, cable: Cable, attempt: int = 0) -> IPv4Network:
    """The cable's /31 for this attempt, the same at both ends."""
    half = cable_half(prefix)
    low, high = sorted((cable.mine, cable.theirs))
    pairs = half.num_addresses // 2
    for extra in range(ATTEMPTS):
        base = half.network_address + 2 * (_hash("cable", low, high, attempt, extra) % pairs)
        if _usable(base) and _usable(base + 1):
            return IPv4Network(f"{base}/31")
    raise ValueError(f"no usable cable subnet in {half}")


def cable_ends(subnet: IPv4Network, cable: Cable) -> tuple[IPv4Address, IPv4Address]:
    """(this end's address, the far end's) on the cable's /31."""
    even, odd = subnet.network_address, subnet.network_address + 1
    return (even, odd) if cable.mine < cable.theirs else (odd, even)


def cable_subnets(
    prefix: IPv4Network, cables: Iterable[Cable], taken: Iterable[IPv4Network] = ()
) -> dict[Cable, IPv4Network]:
    """A /31 for each of this node's cables, unique among them and apart from `taken`: the
    first attempt whose subnet is free, in the cables' order (two of one node's cables on
    one /31 is rare: 0.04 % for 4 cables of a /16, about 1 % for 20)."""
    used = set(taken)
    out = {}
    for cable in sorted(cables):
        for attempt in range(ATTEMPTS):
            subnet = cable_subnet(prefix, cable, attempt)
            if subnet not in used:
                break
        used.add(subnet)
        out[cable] = subnet
    return out


@dataclass(frozen=True)
class HostRoute:
    """A route or address of the host, as the clash check reads it."""

    network: IPv4Network
    what: str  # for the log line: "route 10.77.0.0/24 dev eth0 table main", "address ..."
    device: str = ""  # the interface it is on, where the reader gives it (macOS: Netif)


def clash(
    prefix: IPv4Network, host: Iterable[HostRoute], ours: Iterable[IPv4Network]
) -> HostRoute | None:
    """The first route or address of the host that overlaps the prefix and is not ours (our
    addresses, their connected routes, the routes babeld installed), if any. A default
    route (or any /0) never clashes."""
    own = set(ours)
    for entry in host:
        if entry.network.prefixlen == 0 or entry.network in own:
            continue
        if entry.network.overlaps(prefix):
            return entry
    return None
