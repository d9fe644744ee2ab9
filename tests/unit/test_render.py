"""The one node resolver every command uses: a name, node id or node address, this node
included, and one error text."""

from __future__ import annotations

from typing import Any

import pytest

from babbler.core.errors import BabblerError
from babbler.core.graph import Graph
from babbler.ui.render import (
    ipv4_node_address,
    node_id,
    reachable_node,
    render_nodes,
    render_path,
    render_status,
)
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


def test_a_cut_off_node_has_no_path_and_says_when_it_was_last_seen() -> None:
    value = status()
    value["nodes"][1] |= {"last_seen_s": 12.4, "hops": None, "neighbours": [], "links": []}
    # what n3 said before it was cut off: still a neighbour of n2
    value["nodes"][0]["neighbours"] = [{"node_id": "000000000003", "interface": "a"}]
    with pytest.raises(BabblerError, match=r"^no path to n3 \(last seen 12 s ago\)$"):
        render_path(typed(value), "n3")
    lines = render_nodes(typed(value))
    n3 = next(line for line in lines if line.split()[0] == "n3")
    assert "unreachable" in n3 and n3.endswith("12 s ago")
    # a cut-off node's old info does not make paths through it
    value["nodes"][1]["neighbours"] = [{"node_id": "000000000004", "interface": "b"}]
    graph = Graph.from_status(typed(value).raw)
    assert "000000000004" not in graph.hops({"000000000004": None})


def test_a_node_in_its_down_hold_is_shown_rerouting() -> None:
    value = status()
    value["nodes"][0] |= {"route_lost_s": 0.3, "metric": None}
    n2 = next(line for line in render_nodes(typed(value)) if line.split()[0] == "n2")
    assert "rerouting" in n2


def test_neighbours_are_shown_as_the_nodes_they_are() -> None:
    value = status()
    value["neighbours"] = [{"address": "fe80::2", "interface": "v1x2", "node_id": "000000000002"}]
    text = render_status(typed(value))
    row = next(line for line in text.splitlines() if "fe80::2" in line)
    assert row.split()[:3] == ["n2", "v1x2", "fe80::2"], row


def test_a_kernel_that_fails_is_said_in_status_and_nothing_when_it_is_fine() -> None:
    value = status()
    assert "KERNEL" not in render_status(typed(value))
    value["kernel_problem"] = "reading links: no answer within 6 s"
    line = next(x for x in render_status(typed(value)).splitlines() if "KERNEL" in x)
    assert "reading links: no answer within 6 s" in line and "retries" in line


def test_path_and_nodes_as_data_and_stats_as_lines() -> None:
    from babbler.ui.render import nodes_json, path_of, render_stats

    value = status()
    value["neighbours"] = [
        {"address": "fe80::2", "interface": "v1x2", "node_id": "000000000002", "cost": 32}
    ]
    value["nodes"][0] |= {"interface": "v1x2", "via": "fe80::2", "metric": 32}
    p = path_of(typed(value), "n2")
    assert (p["from"], p["to"], p["hops"], p["metric"]) == ("n1", "n2", 1, 32)
    assert p["steps"] == [{"from": "n1", "interface": "v1x2", "cost": 32, "to": "n2"}]
    assert nodes_json(typed(value))[0]["next_hop"] == "n2"
    assert render_stats({"tasks": 3, "memory": {"rss_mb": 40}}) == ["tasks: 3", "memory.rss_mb: 40"]
