"""The lab's topologies: who is linked to whom, and how far apart nodes are."""

from __future__ import annotations

import pytest

from babbler.lab.topology import LabError, edges, farthest_from, hops_from


def test_grid_links_each_node_right_and_down() -> None:
    # 1 2 3
    # 4 5 6
    # 7 8 9
    assert edges(9, "grid") == [
        (1, 2), (1, 4), (2, 3), (2, 5), (3, 6), (4, 5),
        (4, 7), (5, 6), (5, 8), (6, 9), (7, 8), (8, 9),
    ]  # fmt: skip
    assert farthest_from(edges(9, "grid")) == 9
    assert hops_from(edges(9, "grid"), 1)[9] == 4


@pytest.mark.parametrize("nodes", [2, 3, 5, 7, 10, 64])
def test_a_partial_last_row_stays_connected(nodes: int) -> None:
    links = edges(nodes, "grid")
    assert len(hops_from(links, 1)) == nodes
    assert all(1 <= a < b <= nodes for a, b in links)
    assert len(set(links)) == len(links)


def test_ring_line_and_star_distances() -> None:
    assert max(hops_from(edges(16, "ring"), 1).values()) == 8
    assert max(hops_from(edges(16, "line"), 1).values()) == 15
    assert max(hops_from(edges(16, "star"), 2).values()) == 2
    with pytest.raises(LabError, match="unknown topology"):
        edges(4, "mesh")
