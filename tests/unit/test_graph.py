"""The mesh as a graph from status alone: hops, the cheapest path, finding a node."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from babbler.core.graph import Graph
from babbler.ui.render import render_path
from tests.unit.samples import typed

#   me --v1(32)-- a --(32)-- b
#    \--v2(128)-------------/      the direct link to b is slow: the path goes through a


def node(node_id: str, name: str, neighbours: list[tuple[str, str, int]]) -> dict[str, Any]:
    return {
        "node_id": node_id,
        "name": name,
        "node_address": f"fde0:20c6:1fa7:ffff:{node_id[-4:]}::",
        "reachable": True,
        "metric": 64 if name == "b" else 32,
        "interface": "v1",
        "via": "fe80::a",
        "neighbours": [{"node_id": n, "interface": i} for n, i, _ in neighbours],
        "links": [
            {"name": i, "kind": "other", "speed_mbps": None, "cost": c} for _, i, c in neighbours
        ],
    }


def seen_from(name: str, neighbours: list[tuple[str, str, int]], nodes: list[Any]) -> Any:
    """Node 000000000001's status: its neighbours (node id, link, cost) and the others."""
    listed = [{"node_id": n, "interface": i, "cost": c} for n, i, c in neighbours]
    return {"node_id": "000000000001", "name": name, "neighbours": listed, "nodes": nodes}


STATUS: dict[str, Any] = seen_from(
    "me",
    [("00000000000a", "v1", 32), ("00000000000b", "v2", 128)],
    [
        node("00000000000a", "a", [("000000000001", "a1", 32), ("00000000000b", "a2", 32)]),
        node("00000000000b", "b", [("00000000000a", "b1", 32), ("000000000001", "b2", 128)]),
    ],
)


def test_hops_and_path() -> None:
    graph = Graph.from_status(STATUS)
    # babeld's routes to a and b leave by v1: b is 2 hops that way (1 by v2, not taken)
    assert graph.hops({"00000000000a": "v1", "00000000000b": "v1"}) == {
        "00000000000a": 1,
        "00000000000b": 2,
    }
    assert graph.hops({"00000000000b": "v2"}) == {"00000000000b": 1}
    assert graph.hops({"00000000000b": None}) == {"00000000000b": 2}  # rerouting: the cheapest
    steps = graph.path("00000000000b")
    assert steps is not None
    assert [(frm, e.interface, e.to, e.cost) for frm, e in steps] == [
        ("000000000001", "v1", "00000000000a", 32),
        ("00000000000a", "a2", "00000000000b", 32),
    ]


def test_path_for_people_names_each_hop_and_checks_babeld() -> None:
    text = render_path(typed(STATUS), "b")
    assert text.splitlines() == [
        "me -> b: 2 hops, cost 64, babeld's metric 64",
        "  me  v1 (cost 32)  -> a",
        "  a  a2 (cost 32)  -> b",
    ]
    STATUS["nodes"][1]["interface"] = "v2"  # babeld's route takes the direct link: so does path
    try:
        assert render_path(typed(STATUS), "b").splitlines() == [
            "me -> b: 1 hop, cost 128, babeld's metric 64",
            "  me  v2 (cost 128)  -> b",
        ]
        STATUS["nodes"][1]["interface"] = "v9"  # a link no info knows: the infos are behind
        assert "babeld's route leaves by v9, not v1" in render_path(typed(STATUS), "b")
    finally:
        STATUS["nodes"][1]["interface"] = "v1"
    assert render_path(typed(STATUS), "fde0:20c6:1fa7:ffff:000a::").startswith("me -> a")


def test_dot_has_every_machine_once_this_one_bold_and_each_link_once() -> None:
    from babbler.core.graph import to_dot

    dot = to_dot(Graph.from_status({**STATUS, "name": 'me "1"'}))
    assert dot.startswith("graph mesh {") and dot.endswith("}\n")
    assert '"000000000001" [label="me \\"1\\"\\n000000000001", style="rounded,bold"' in dot
    links = [line.strip() for line in dot.splitlines() if " -- " in line]
    assert links == [
        '"000000000001" -- "00000000000a" [label="v1 - a1"];',
        '"000000000001" -- "00000000000b" [label="v2 - b2"];',
        '"00000000000a" -- "00000000000b" [label="a2 - b1"];',
    ]


def test_svg_is_drawn_by_graphviz_or_the_missing_package_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from babbler.core.errors import BabblerError
    from babbler.core.graph import to_dot
    from babbler.ui.command import render_svg
    from tests.needs import tool

    dot = to_dot(Graph.from_status(STATUS))
    tool("dot", "graphviz")
    render_svg(dot, tmp_path / "mesh.svg")
    svg = (tmp_path / "mesh.svg").read_text()
    assert "<svg" in svg and ">me<" in svg and ">a2 &#45; b1<" in svg
    monkeypatch.setenv("PATH", str(tmp_path))  # no dot here
    with pytest.raises(BabblerError, match=r"dot is not installed .*apt-get install graphviz"):
        render_svg(dot, tmp_path / "other.svg")


def test_of_equal_paths_the_one_babeld_takes_is_shown_and_no_false_note() -> None:
    """A ring of 4: n3 is 2 hops either way; babeld's route leaves by v4 (towards n4)."""

    def ring_node(node_id: str, name: str, links: list[tuple[str, str]]) -> dict[str, Any]:
        return {
            **node(node_id, name, [(n, i, 32) for n, i in links]),
            "metric": 64 if name == "n3" else 32,
            "interface": "v4" if name in ("n3", "n4") else "v2",
        }

    status = seen_from(
        "n1",
        [("000000000002", "v2", 32), ("000000000004", "v4", 32)],
        [
            ring_node("000000000002", "n2", [("000000000001", "a"), ("000000000003", "b")]),
            ring_node("000000000003", "n3", [("000000000002", "c"), ("000000000004", "d")]),
            ring_node("000000000004", "n4", [("000000000003", "e"), ("000000000001", "f")]),
        ],
    )
    lines = render_path(typed(status), "n3").splitlines()
    assert lines[1].split()[:2] == ["n1", "v4"] and "note" not in "\n".join(lines), lines


def test_a_node_only_another_s_info_names_gets_a_path_by_its_id() -> None:
    """A neighbour in someone's info that no status lists (hostile, or not announced yet):
    `babblerctl path` names it by its id instead of failing (hypothesis found it)."""
    status = {
        "node_id": "00000000000a",
        "name": "a",
        "neighbours": [{"node_id": "00000000000b", "interface": "en2", "cost": 96}],
        "nodes": [
            {
                "node_id": "00000000000b",
                "name": "b",
                "reachable": True,
                "neighbours": [{"node_id": "0123456789ab", "interface": "en3"}],
                "links": [],
            }
        ],
    }
    graph = Graph.from_status(status)
    assert graph.names["0123456789ab"] == "0123456789ab"
    steps = graph.path("0123456789ab")
    assert steps is not None and [graph.names[e.to] for _, e in steps] == ["b", "0123456789ab"]


def test_right_after_a_pull_path_and_hops_follow_babeld_not_a_stale_info() -> None:
    """A 5-ring seen from n1 just after n2-n3's cable was pulled: n2's info still lists n3,
    babeld already routes to n3 by v1x5 (n5). path and HOPS follow babeld: 3 hops via n5,
    where the stale info gave "2 hops, n2 v2x3 -> n3" beside LINK v1x5 NEXT HOP n5."""

    def ring_node(number: int, links: list[tuple[int, str]], interface: str) -> dict[str, Any]:
        return {
            **node(
                f"00000000000{number}", f"n{number}", [(f"00000000000{n}", i, 96) for n, i in links]
            ),
            "interface": interface,
        }

    status = seen_from(
        "n1",
        [("000000000002", "v1x2", 96), ("000000000005", "v1x5", 96)],
        [
            ring_node(2, [(1, "v2x1"), (3, "v2x3")], "v1x2"),  # stale: v2x3 is out
            ring_node(3, [(4, "v3x4")], "v1x5"),  # n3's new info came already
            ring_node(4, [(3, "v4x3"), (5, "v4x5")], "v1x5"),
            ring_node(5, [(4, "v5x4"), (1, "v5x1")], "v1x5"),
        ],
    )
    status["nodes"][1]["metric"] = 288
    lines = render_path(typed(status), "n3").splitlines()
    assert lines == [
        "n1 -> n3: 3 hops, cost 288, babeld's metric 288",
        "  n1  v1x5 (cost 96)  -> n5",
        "  n5  v5x4 (cost 96)  -> n4",
        "  n4  v4x3 (cost 96)  -> n3",
    ]
    from babbler.core.views import with_hops

    hops = {n["name"]: n["hops"] for n in with_hops(status)}
    assert hops == {"n2": 1, "n3": 3, "n4": 2, "n5": 1}


def test_an_unreachable_node_is_drawn_dashed_and_grey_and_says_so() -> None:
    from babbler.core.graph import to_dot

    cut = node("00000000000c", "c", [("00000000000a", "c1", 32)]) | {"reachable": False}
    a = node("00000000000a", "a", [("000000000001", "a1", 32), ("00000000000c", "a3", 32)])
    dot = to_dot(Graph.from_status(seen_from("me", [("00000000000a", "v1", 32)], [a, cut])))
    shown = {line.split(" [")[0].strip(): line for line in dot.splitlines() if " [label" in line}
    c = shown['"00000000000c"']
    assert 'label="c\\n00000000000c\\nunreachable"' in c and "dashed" in c and "grey" in c, c
    assert "dashed" not in shown['"00000000000a"'] and "unreachable" not in shown['"00000000000a"']
    stale = shown['"00000000000a" -- "00000000000c"']  # a's info still lists the cable
    assert "dashed" in stale and "grey" in stale, stale
    assert "dashed" not in shown['"000000000001" -- "00000000000a"']
