"""Lab topologies: which nodes get a link, how links are named, hop distances. Pure."""

from __future__ import annotations

import math

from babbler.core.errors import BabblerError

TOPOLOGIES = ("line", "ring", "star", "grid")


class LabError(BabblerError):
    pass


class LabNotUp(LabError):
    """No lab of that name is up: nothing recorded."""


def edges(nodes: int, topology: str) -> list[tuple[int, int]]:
    """Node pairs (1-based) that get a link."""
    if topology == "line":
        return [(i, i + 1) for i in range(1, nodes)]
    if topology == "ring":
        pairs = [(i, i + 1) for i in range(1, nodes)]
        return [*pairs, (nodes, 1)] if nodes > 2 else pairs
    if topology == "star":
        return [(1, i) for i in range(2, nodes + 1)]
    if topology == "grid":  # rows of ceil(sqrt(n)), each node linked right and down
        width = math.ceil(math.sqrt(nodes))
        right = [(i, i + 1) for i in range(1, nodes) if i % width]
        down = [(i, i + width) for i in range(1, nodes - width + 1)]
        return sorted(right + down)
    raise LabError(f"unknown topology {topology!r} (one of {', '.join(TOPOLOGIES)})")


def link_name(here: int, there: int, prefix: str = "v") -> str:
    """`v1x2` is node 1's end of its link to node 2; another set of links between the same
    nodes takes another prefix (`s1x2`)."""
    return f"{prefix}{here}x{there}"


def hops_from(links: list[tuple[int, int]], source: int) -> dict[int, int]:
    """Node -> hops from `source` (breadth-first over `links`)."""
    hops = {source: 0}
    frontier = [source]
    while frontier:
        nxt = []
        for here in frontier:
            for a, b in links:
                for x, y in ((a, b), (b, a)):
                    if x == here and y not in hops:
                        hops[y] = hops[here] + 1
                        nxt.append(y)
        frontier = nxt
    return hops


def farthest_from(links: list[tuple[int, int]], source: int = 1) -> int:
    """The node with the most hops from `source`."""
    hops = hops_from(links, source)
    return max(hops, key=lambda i: (hops[i], i))
