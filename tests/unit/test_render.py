"""The one node resolver every command uses: a name, node id or node address, this node
included, and one error text."""

from __future__ import annotations

from typing import Any

import pytest

from babbler.core.errors import BabblerError
from babbler.ui.render import ipv4_node_address, node_id, reachable_node
from tests.unit.samples import typed


def status() -> dict[str, Any]:
    def node(name: str, ident: str, reachable: bool) -> dict[str, Any]:
        address = f"fde0:20c6:1fa7:ffff:0:0:{ident[-4:]}:0"
        return {"node_id": ident, "name": name, "node_address": address, "reachable": reachable}

    return {
        "node_id": "000000000001",
        "name": "n1",
        "node_address": "fde0:20c6:1fa7:ffff:0:0:1:0",
        "nodes": [node("n2", "000000000002", True), node("n3", "000000000003", False)],
    }


def test_a_node_is_found_by_name_id_or_address_this_one_too() -> None:
    s = typed(status())
    for what in ("n2", "000000000002", "fde0:20c6:1fa7:ffff:0:0:2:0"):
        assert node_id(s, what) == "000000000002"
    for what in ("n1", "000000000001", "fde0:20c6:1fa7:ffff:0:0:1:0"):
        assert node_id(s, what) == "000000000001"


def test_an_unknown_node_has_one_error_text() -> None:
    with pytest.raises(BabblerError, match=r"^no node 'n9' \(a name, node id or node address"):
        node_id(typed(status()), "n9")


def test_reachable_node_refuses_this_node_and_unreachable_ones() -> None:
    s = typed(status())
    assert reachable_node(s, "n2").node_id == "000000000002"
    with pytest.raises(BabblerError, match=r"^n1 is this node$"):
        reachable_node(s, "n1")
    with pytest.raises(BabblerError, match=r"^n3 is not reachable now$"):
        reachable_node(s, "n3")


def test_the_ipv4_node_address_or_why_there_is_none() -> None:
    assert ipv4_node_address(typed({})) == "10.77.44.75"
    off = typed({"ipv4_prefix": None, "node_address_v4": None, "addresses_v4": []})
    with pytest.raises(
        BabblerError, match=r"^IPv4 is off on this node \(babblerd --ipv4-prefix off\)$"
    ):
        ipv4_node_address(off)
    clash = "route 10.77.5.0/24 table 254 overlaps 10.77.0.0/16"
    refused = typed({"node_address_v4": None, "ipv4_problem": clash, "addresses_v4": []})
    with pytest.raises(BabblerError, match=f"^IPv4 refused: {clash}$"):
        ipv4_node_address(refused)


def test_bench_over_ipv4_takes_the_ipv4_node_addresses_or_says_which_is_missing() -> None:
    from babbler.bench.cli import over_ipv4

    v4 = over_ipv4(
        typed({**status(), "nodes": [{**status()["nodes"][0], "node_address_v4": "10.77.0.9"}]})
    )
    assert v4.node_address == "10.77.44.75" and [n.node_address for n in v4.nodes] == ["10.77.0.9"]
    unknown = {**status()["nodes"][0], "node_address_v4": None}
    with pytest.raises(BabblerError, match=r"^n2's IPv4 node address is not known \(yet\)$"):
        over_ipv4(typed({**status(), "nodes": [unknown]}), "n2")
