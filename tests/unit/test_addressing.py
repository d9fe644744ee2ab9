from ipaddress import IPv6Address, IPv6Network

import pytest
from hypothesis import given
from hypothesis import strategies as st

from babbler.core.addressing import (
    MESH_PREFIX,
    format_node_id,
    index_in_range,
    interface_address,
    is_stale,
    next_free_index,
    node_range,
    owner_of,
    parse_node_id,
)

node_ids = st.integers(min_value=1, max_value=(1 << 48) - 1)  # 0 is reserved (below)
indices = st.integers(min_value=1, max_value=65534)


def test_node_range_matches_the_contract_example() -> None:
    assert node_range(0x1A2B3C4D5E6F) == IPv6Network("fde0:20c6:1fa7:ffff:1a2b:3c4d:5e6f:0/112")
    assert interface_address(0x1A2B3C4D5E6F, 1) == IPv6Address(
        "fde0:20c6:1fa7:ffff:1a2b:3c4d:5e6f:1"
    )


@given(node_ids, indices)
def test_interface_address_is_in_own_range_and_not_stale(node_id: int, n: int) -> None:
    address = interface_address(node_id, n)
    assert address in node_range(node_id)
    assert address in MESH_PREFIX
    assert not is_stale(node_id, address)
    assert index_in_range(node_id, address) == n
    assert owner_of(address) == node_id


@given(node_ids, node_ids, indices)
def test_another_nodes_address_is_stale(mine: int, theirs: int, n: int) -> None:
    address = interface_address(theirs, n)
    assert is_stale(mine, address) == (mine != theirs)


@given(node_ids, st.integers(min_value=0, max_value=(1 << 128) - 1))
def test_addresses_outside_the_mesh_are_never_stale(node_id: int, value: int) -> None:
    address = IPv6Address(value)
    if address not in MESH_PREFIX:
        assert not is_stale(node_id, address)
        assert index_in_range(node_id, address) is None


@given(node_ids)
def test_node_id_spelling_round_trips(node_id: int) -> None:
    text = format_node_id(node_id)
    assert len(text) == 12 and text == text.lower()
    assert parse_node_id(text) == node_id
    assert parse_node_id("0x" + text.upper()) == node_id


@pytest.mark.parametrize("bad", ["", "xyz", "1a2b3c4d5e6", "1a2b3c4d5e6f0", "1a2b 3c4d5e6f", "-1"])
def test_bad_node_ids_are_refused_with_a_reason(bad: str) -> None:
    with pytest.raises(ValueError, match="12 hex digits"):
        parse_node_id(bad)


def test_reserved_indices_are_refused() -> None:
    for n in (0, 65535):
        with pytest.raises(ValueError):
            interface_address(1, n)
        assert index_in_range(1, node_range(1).network_address + n) is None


def test_next_free_index_fills_gaps_and_knows_when_full() -> None:
    assert next_free_index(set()) == 1
    assert next_free_index({1, 2, 4}) == 3
    with pytest.raises(ValueError, match="in use"):
        next_free_index(set(range(1, 65535)))
