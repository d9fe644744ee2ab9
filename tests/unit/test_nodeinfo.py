"""Node info, pure: neighbours as node ids, the answer's cap, who may ask and how often."""

from __future__ import annotations

import json
from ipaddress import IPv6Address

import pytest

from babbler.core.addressing import format_node_id, interface_address, node_address, node_range
from babbler.core.views import Facts
from babbler.daemon.nodes.answer import (
    ANSWER_CAP,
    RateLimit,
    answer,
    encode,
    from_the_mesh,
    neighbours,
)
from babbler.daemon.nodes.checked import BadInfo, depth, parse
from babbler.daemon.nodes.own import OwnInfo
from tests.schemas import check_node_info
from tests.unit.recorded import table_of
from tests.unit.samples import facts as sample_facts

ME, PEER = 0x1A2B3C4D5E6F, 0x0000AAAA0001


def facts(*lines: str) -> Facts:
    return sample_facts(table=table_of(*lines))


NEIGHBOUR = "add neighbour n1 address fe80::2 if v1x2 reach ffff rxcost 32 txcost 32 cost 32"
OWN_ROUTE = (
    f"add route r1 prefix {node_range(PEER)} from ::/0 installed yes id 02:00:00:00:00:00:00:02 "
    "metric 32 refmetric 0 via fe80::2 if v1x2"
)
FAR_ROUTE = (
    f"add route r2 prefix {interface_address(0xBBBB, 1)}/128 from ::/0 installed yes "
    "id 02:00:00:00:00:00:00:03 metric 64 refmetric 32 via fe80::2 if v1x2"
)


def test_a_neighbour_is_the_node_whose_own_range_it_announces() -> None:
    assert neighbours(facts(NEIGHBOUR, FAR_ROUTE)) == [
        {"node_id": None, "interface": "v1x2", "address": "fe80::2"}  # not known yet
    ]
    assert neighbours(facts(NEIGHBOUR, FAR_ROUTE, OWN_ROUTE))[0]["node_id"] == format_node_id(PEER)


def test_the_answer_is_one_line_under_the_cap_even_with_huge_lists() -> None:
    value = answer(facts(NEIGHBOUR, OWN_ROUTE), "n1", (("role", "worker"),), 3.14, node_address(ME))
    line = json.loads(encode(value))
    assert line["name"] == "n1" and line["info"] == {"role": "worker"}
    assert line["node_id"] == format_node_id(ME) and line["uptime_s"] == 3.1
    check_node_info(line)
    value["neighbours"] = value["neighbours"] * 2000
    data = encode(value)
    assert len(data) <= ANSWER_CAP and data.endswith(b"\n") and data.count(b"\n") == 1
    assert json.loads(data)["truncated"] is True
    check_node_info(json.loads(data))


def test_only_mesh_sources_and_at_most_the_rate() -> None:
    assert from_the_mesh(IPv6Address("fde0:20c6:1fa7:ffff::1"))
    assert not from_the_mesh(IPv6Address("fd00::1")) and not from_the_mesh(IPv6Address("::1"))
    limit = RateLimit(rate=1.0, burst=3.0, sources=2)
    assert [limit.allow("a", 0.0) for _ in range(4)] == [True, True, True, False]
    assert limit.allow("a", 1.0)  # a token a second
    assert limit.allow("b", 1.0) and limit.allow("c", 1.0)  # "a" is forgotten: 2 sources kept
    assert [limit.allow("a", 1.0) for _ in range(4)] == [True, True, True, False]


def test_a_babblerd_s_own_answer_is_taken_as_it_is_even_shortened() -> None:
    value = OwnInfo().stamp(  # as the node service sends it: with its version
        answer(
            facts(NEIGHBOUR, OWN_ROUTE), "n1", (("role", "w"), ("gpus", 8)), 3.14, node_address(ME)
        ),
        0.0,
    )
    value["cables"] = [{"interface": "v1x2", "address": "10.77.128.0", "peer": "10.77.128.1"}]
    for data in (encode(value), encode({**value, "neighbours": value["neighbours"] * 2000})):
        assert parse(data) == json.loads(data)
    long = answer(facts(NEIGHBOUR), "n" * 100, (), 1.0, node_address(ME))  # a macOS host name
    assert parse(encode(long))["name"] == "n" * 64


def test_an_older_answer_lacking_later_fields_is_taken() -> None:
    old = {"node_id": format_node_id(PEER), "name": "n2", "version": "0.0.9", "uptime_s": 5}
    old["interfaces"] = [{"name": "eth1", "kind": "ethernet", "speed_mbps": None, "cost": 96}]
    info = parse(json.dumps(old).encode())
    assert info["interfaces"][0]["max_mtu"] is None and info["cables"] == []
    assert info["node_address_v4"] is None and info["info"] == {} and info["neighbours"] == []


def test_depth_counts_brackets_outside_strings_only() -> None:
    assert depth(b'{"a": [[1], {"b": "[[[[{{"}]}') == 3
    assert depth(b'{"a": "\\"[[[["}') == 1
    with pytest.raises(BadInfo, match="nested deeper than 16"):
        parse(b'{"info": ' + b"[" * 17 + b"]" * 17 + b"}")
