"""IPv4 addressing (core/ipv4.py): the prefix's rules, node and cable addresses that both
ends agree on without asking, and the clash check."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network, IPv6Address

import pytest
from hypothesis import given
from hypothesis import strategies as st

from babbler.core.errors import ConfigError
from babbler.core.ipv4 import (
    DEFAULT_PREFIX,
    Cable,
    HostRoute,
    cable_ends,
    cable_half,
    cable_subnet,
    cable_subnets,
    clash,
    node_address_v4,
    node_half,
    parse_prefix,
)

PREFIXES = st.sampled_from(
    [DEFAULT_PREFIX, IPv4Network("192.168.4.0/22"), IPv4Network("172.20.0.0/16")]
)
NODE_IDS = st.integers(0, (1 << 48) - 1)
LINK_LOCALS = st.integers(1, (1 << 64) - 1).map(lambda n: IPv6Address((0xFE80 << 112) | n))


def test_the_default_prefix_is_a_private_slash_16() -> None:
    assert parse_prefix("ipv4-prefix", str(DEFAULT_PREFIX)) == DEFAULT_PREFIX
    assert parse_prefix("ipv4-prefix", "OFF") is None


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("8.8.0.0/16", "not private space"),
        ("100.64.0.0/16", "not private space"),
        ("10.0.0.0/8", "/16 to a /22"),
        ("10.77.0.0/24", "/16 to a /22"),
        ("10.77.0.1/16", "not an IPv4 prefix"),
        ("fde0::/48", "is IPv6"),
        ("garbage", "not an IPv4 prefix"),
        ("", "not an IPv4 prefix"),
        (16, "expected an IPv4 prefix"),
    ],
)
def test_bad_prefixes_are_refused_in_one_line(value: object, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem) as raised:
        parse_prefix("ipv4-prefix", value)
    assert "\n" not in str(raised.value)


@given(PREFIXES, NODE_IDS, st.integers(0, 5))
def test_a_node_address_lies_in_the_lower_half_and_is_no_network_or_broadcast_look_alike(
    prefix: IPv4Network, node_id: int, attempt: int
) -> None:
    address = node_address_v4(prefix, node_id, attempt)
    assert address in node_half(prefix)
    assert int(address) & 0xFF not in (0, 255)
    assert address == node_address_v4(prefix, node_id, attempt)  # deterministic


def test_the_next_attempt_moves_the_address() -> None:
    assert node_address_v4(DEFAULT_PREFIX, 7, 0) != node_address_v4(DEFAULT_PREFIX, 7, 1)


@given(PREFIXES, LINK_LOCALS, LINK_LOCALS)
def test_both_ends_of_a_cable_agree_on_its_subnet_and_take_one_address_each(
    prefix: IPv4Network, a: IPv6Address, b: IPv6Address
) -> None:
    if a == b:
        return
    here, there = Cable("eth1", a, b), Cable("en5", b, a)
    subnet = cable_subnet(prefix, here)
    assert subnet == cable_subnet(prefix, there) and subnet.prefixlen == 31
    assert subnet.subnet_of(cable_half(prefix))
    mine, theirs = cable_ends(subnet, here)
    assert cable_ends(subnet, there) == (theirs, mine) and mine != theirs


def test_a_node_s_cables_get_distinct_subnets_even_when_their_hashes_meet() -> None:
    cables = [
        Cable(f"v{i}", IPv6Address(f"fe80::{i}:1"), IPv6Address(f"fe80::{i}:2")) for i in range(40)
    ]
    small = IPv4Network("192.168.4.0/22")  # 256 cable subnets: 40 cables meet now and then
    chosen = cable_subnets(small, cables)
    assert len(set(chosen.values())) == 40
    taken = chosen[cables[0]]
    again = cable_subnets(small, cables[:1], taken=[taken])
    assert again[cables[0]] != taken


def test_a_host_route_or_address_in_the_prefix_clashes_unless_it_is_ours() -> None:
    ours = [IPv4Network("10.77.1.2/32")]
    host = [
        HostRoute(IPv4Network("0.0.0.0/0"), "default route"),
        HostRoute(IPv4Network("10.77.1.2/32"), "our address"),
        HostRoute(IPv4Network("10.78.0.0/16"), "route next door"),
    ]
    assert clash(DEFAULT_PREFIX, host, ours) is None
    lan = HostRoute(IPv4Network("10.77.5.0/24"), "route 10.77.5.0/24 dev eth0 table main")
    assert clash(DEFAULT_PREFIX, [*host, lan], ours) == lan
    wide = HostRoute(IPv4Network("10.0.0.0/8"), "route 10.0.0.0/8 dev tun0")
    assert clash(DEFAULT_PREFIX, [wide], ours) == wide


def test_addresses_are_ipv4() -> None:
    assert isinstance(node_address_v4(DEFAULT_PREFIX, 1), IPv4Address)
