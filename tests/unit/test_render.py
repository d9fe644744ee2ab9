"""The one node resolver every command uses: a name, node id or node address, this node
included, and one error text."""

from __future__ import annotations

import re
from pathlib import Path
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


def test_bench_over_ipv4_finds_a_node_of_a_mesh_whose_routes_hold_its_links() -> None:
    """`bench -4 n2`: the nodes' node addresses are the IPv4 ones then, and finding NODE reads
    every node's link addresses from babeld's routes (it raised AddressValueError)."""
    from babbler.bench.cli import over_ipv4

    v4 = over_ipv4(typed(mesh()))
    assert node_id(v4, "n2") == "aaaabbbbcccc"
    assert node_id(v4, "fde0:20c6:1fa7:ffff:aaaa:bbbb:cccc:2") == "aaaabbbbcccc"  # a link's
    with pytest.raises(BabblerError, match=r"^no node 'nosuch'"):
        node_id(v4, "nosuch")


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
    assert render_stats({"tasks": 3, "memory": {"rss_mb": 40}}) == [
        "tasks:         3",
        "memory.rss_mb: 40",
    ]


def test_status_names_babeld_once_before_its_version() -> None:
    shown = render_status(typed({}))  # babeld's own "babeld-1.12.1"
    assert "babeld 1.12.1  pid 123" in shown and "babeld babeld" not in shown, shown


def mesh() -> dict[str, Any]:
    """n1 (samples.STATUS: a link eth1 with an IPv6 and a cable address) and n2, whose own
    link addresses come only from babeld's routes (its info does not list them)."""
    n2 = "fde0:20c6:1fa7:ffff:aaaa:bbbb:cccc"
    route = {"router_id": "x", "metric": 32, "refmetric": 0, "installed": True}
    route |= {"via": "fe80::2", "interface": "eth1"}
    return {
        "neighbours": [{"address": "fe80::2", "interface": "eth1", "node_id": "aaaabbbbcccc"}],
        "routes": [
            {**route, "prefix": f"{n2}:0/128"},  # its node address
            {**route, "prefix": f"{n2}:2/128"},
            {**route, "prefix": f"{n2}:1/128", "installed": False},  # another router's too
            {**route, "prefix": f"{n2}:1/128"},
            {**route, "prefix": "fde0:20c6:1fa7:ffff:0:0:9:1/128"},  # a third node's
        ],
        "nodes": [
            {
                "node_id": "aaaabbbbcccc",
                "cables": [
                    {"interface": "eth3", "address": "10.77.168.99", "peer": "10.77.168.98"}
                ],
            }
        ],
    }


def test_a_node_is_found_by_its_id_in_any_case_and_by_any_of_its_addresses() -> None:
    s = typed(mesh())
    for what in (
        "AAAABBBBCCCC",  # as a person may type it off a label
        "fde0:20c6:1fa7:ffff:aaaa:bbbb:cccc:1",  # a link's IPv6 address
        "FDE0:20C6:1FA7:FFFF:AAAA:BBBB:CCCC:2",
        "10.77.168.99",  # its end of a cable
        "fe80::2%eth1",  # as the neighbour babeld met
    ):
        assert node_id(s, what) == "aaaabbbbcccc", what
    for what in ("1A2B3C4D5E6F", "fde0:20c6:1fa7:ffff:1a2b:3c4d:5e6f:1", "10.77.168.98"):
        assert node_id(s, what) == "1a2b3c4d5e6f", what
    with pytest.raises(BabblerError, match="no node 'N2'"):
        node_id(s, "N2")  # names are as the node says them


def hostile() -> dict[str, Any]:
    """mesh() with a third node n3 (id 00000000000b), listed first, that says in its info
    what is other nodes': n2's cable address, this node's, and their IPv4 node addresses."""
    value = mesh()
    value["nodes"][-1] |= {"name": "n2", "node_address_v4": "10.77.98.201"}
    value["nodes"].insert(
        0,
        {
            "node_id": "00000000000b",
            "name": "n3",
            "node_address": "fde0:20c6:1fa7:ffff:0:0:b:0",
            "node_address_v4": "10.77.44.75",  # this node's
            "cables": [
                {"interface": f"eth{i}", "address": a, "peer": "10.77.200.1"}
                for i, a in enumerate(["10.77.168.99", "10.77.168.98", "10.77.98.201"])
            ],
        },
    )
    return value


def test_what_a_node_says_of_itself_never_takes_another_nodes_address() -> None:
    s = typed(hostile())
    assert node_id(s, "10.77.44.75") == "1a2b3c4d5e6f"  # this node's own IPv4 node address
    assert node_id(s, "10.77.168.98") == "1a2b3c4d5e6f"  # this node's own end of a cable
    assert node_id(s, "10.77.98.201") == "aaaabbbbcccc"  # n2's node address before a cable
    with pytest.raises(BabblerError) as refused:
        node_id(s, "10.77.168.99")  # n2's cable end, which n3 says is its own too
    assert str(refused.value) == (
        "'10.77.168.99' names more than one node: n3 (id 00000000000b), n2 (id aaaabbbbcccc);"
        " use its node id"
    )


def test_a_node_id_wins_over_a_name_and_an_address_is_never_a_name() -> None:
    value = hostile()
    value["nodes"][0]["name"] = "AAAABBBBCCCC"  # n2's node id, as a person may type it
    assert node_id(typed(value), "AAAABBBBCCCC") == "aaaabbbbcccc"
    value["nodes"][0]["name"] = "fde0:20c6:1fa7:ffff:aaaa:bbbb:cccc:1"  # n2's link address
    assert node_id(typed(value), "fde0:20c6:1fa7:ffff:aaaa:bbbb:cccc:1") == "aaaabbbbcccc"
    value["nodes"][0]["name"] = "10.9.9.9"  # no node's address: still not a name
    with pytest.raises(BabblerError, match=r"^no node '10\.9\.9\.9'"):
        node_id(typed(value), "10.9.9.9")


def test_two_nodes_of_one_name_are_refused_naming_both_and_their_ids_find_each() -> None:
    value = hostile()
    value["nodes"][0]["name"] = "n1"  # this node's name
    s = typed(value)
    with pytest.raises(BabblerError) as refused:
        node_id(s, "n1")
    assert str(refused.value) == (
        "'n1' names more than one node: n1 (id 00000000000b), n1 (id 1a2b3c4d5e6f); use its node id"
    )
    assert node_id(s, "00000000000B") == "00000000000b"
    assert node_id(s, "1a2b3c4d5e6f") == "1a2b3c4d5e6f"
    assert reachable_node(typed(hostile()), "n3").node_id == "00000000000b"


def test_ip_all_lists_every_address_of_both_families_and_4_or_6_filter_by_family() -> None:
    from babbler.ui.render import find_node, ip_json, ip_lines

    s = typed(mesh())
    assert ip_lines(s, None, False, False, True) == [
        "fde0:20c6:1fa7:ffff:1a2b:3c4d:5e6f:0  node address",
        "10.77.44.75  node address",  # the one jobs use
        "fde0:20c6:1fa7:ffff:1a2b:3c4d:5e6f:1  eth1",
        "10.77.168.98  eth1 (cable to 10.77.168.99)",
    ]
    assert ip_lines(s, None, True, False, True) == [
        "10.77.44.75  node address",
        "10.77.168.98  eth1 (cable to 10.77.168.99)",
    ]
    assert ip_lines(s, None, False, True, True) == [
        "fde0:20c6:1fa7:ffff:1a2b:3c4d:5e6f:0  node address",
        "fde0:20c6:1fa7:ffff:1a2b:3c4d:5e6f:1  eth1",
    ]
    assert ip_lines(s, None, False, False, False) == ["fde0:20c6:1fa7:ffff:1a2b:3c4d:5e6f:0"]
    assert ip_lines(s, None, True, False, False) == ["10.77.44.75"]
    n2 = find_node(s, "aaaabbbbcccc")
    assert ip_lines(s, n2, False, False, True) == [
        "fde0:20c6:1fa7:ffff:aaaa:bbbb:cccc:0  node address",
        "10.77.98.201  node address",
        "fde0:20c6:1fa7:ffff:aaaa:bbbb:cccc:1  a link of n2",
        "fde0:20c6:1fa7:ffff:aaaa:bbbb:cccc:2  a link of n2",
        "10.77.168.99  eth3 (cable to 10.77.168.98)",
    ]
    answer = ip_json(s, n2)
    assert [a["address"] for a in answer["addresses"]] == [
        "fde0:20c6:1fa7:ffff:aaaa:bbbb:cccc:1",
        "fde0:20c6:1fa7:ffff:aaaa:bbbb:cccc:2",
    ]
    assert answer["cables"][0]["address"] == "10.77.168.99"


def test_ip_all_without_ipv4_leaves_it_out_and_minus_4_says_why() -> None:
    from babbler.ui.render import ip_lines

    s = typed({"ipv4_prefix": None, "node_address_v4": None, "addresses_v4": []})
    assert ip_lines(s, None, False, False, True) == [
        "fde0:20c6:1fa7:ffff:1a2b:3c4d:5e6f:0  node address",
        "fde0:20c6:1fa7:ffff:1a2b:3c4d:5e6f:1  eth1",
    ]
    with pytest.raises(BabblerError, match="IPv4 is off"):
        ip_lines(s, None, True, False, True)


def test_stats_on_a_terminal_are_named_in_words_and_units_and_help_explains_each() -> None:
    from click.testing import CliRunner

    from babbler.ctl.main import main as babblerctl
    from babbler.ui.render import STATS, render_stats

    said = {"pid": 7, "rss_bytes": 43204608, "babeld_lines_in": 12345, "babeld_held": 2}
    assert render_stats(said | {"newer_key": 1}) == [
        "process id:             7",
        "memory:                 41.2 MiB",
        "babeld lines read:      12,345",
        "neighbour changes held: 2",
        "newer_key:              1",  # a key from a newer babblerd, as it said it
    ]
    shown = " ".join(CliRunner().invoke(babblerctl, ["stats", "--help"]).output.split())
    for key, (label, meaning) in STATS.items():
        assert f"{key} {label}: {meaning}" in shown, key
    protocol = (Path(__file__).parents[2] / "docs" / "protocol.md").read_text()
    row = next(line for line in protocol.splitlines() if line.startswith("| `stats` |"))
    listed = re.findall(r'"(\w+)"', row[row.index("{") : row.index("}")])
    assert "babeld_held" in listed and sorted(listed) == sorted(STATS)  # every key explained
