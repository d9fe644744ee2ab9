"""A ring through the cables (pure): an order of nodes where each is cabled to the next and
the last to the first, as MLX's ring backend needs.

Nodes are numbered 0..n-1 in node-id order; `width[i][j]` is how many cables join i and j.
The ring chosen, the same on every node for the same mesh:
1. the widest: the one whose narrowest step has the most parallel cables (MLX opens as many
   connections per step as the narrowest step has cables, so this is the job's bandwidth);
2. among those, the first in lexicographic order of node ids, starting at the lowest node id
   (so of a ring's two directions, the one whose second node has the lower id).
Up to EXACT nodes the search is exact: it finds a ring whenever one exists. Beyond, the same
depth-first search stops after STEP_BUDGET steps and may miss a ring that exists.
Two nodes joined by a cable are a ring (each is the other's left and right).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

EXACT = 16  # nodes: 2^15 subsets x 16 ends at most, well under a second
STEP_BUDGET = 200_000  # search steps beyond EXACT nodes (a few seconds at most)


class GaveUp(Exception):
    """The bounded search (more than EXACT nodes) ran out of steps."""


def find_ring(width: Sequence[Sequence[int]]) -> tuple[list[int], int] | None:
    """(order starting at 0, cables per step), or None when no order has a cable at every
    step. Raises GaveUp beyond EXACT nodes when the search was cut short."""
    n = len(width)
    if n < 2:
        return None
    widths = sorted({width[i][j] for i in range(n) for j in range(n) if i != j and width[i][j]})
    gave_up = False
    for least in reversed(widths):
        adjacent = [
            sum(1 << j for j in range(n) if j != i and width[i][j] >= least) for i in range(n)
        ]
        try:
            order = _first_ring(adjacent)
        except GaveUp:
            gave_up = True
            continue
        if order is not None:
            return order, least
    if gave_up:
        raise GaveUp
    return None


def _first_ring(adjacent: list[int]) -> list[int] | None:
    """The lexicographically first Hamiltonian cycle from node 0, by depth-first search
    with memory of the (visited set, last node) pairs that cannot be completed."""
    n = len(adjacent)
    full = (1 << n) - 1
    steps = 0

    @cache
    def completes(visited: int, last: int) -> bool:
        nonlocal steps
        steps += 1
        if n > EXACT and steps > STEP_BUDGET:
            raise GaveUp
        if visited == full:
            return bool(adjacent[last] & 1)
        return any(completes(visited | 1 << nxt, nxt) for nxt in _bits(adjacent[last] & ~visited))

    if n > 2 and any(mask.bit_count() < 2 for mask in adjacent):
        return None  # a node with one neighbour ends every path (the common refusal, at once)
    if n > 512:
        raise GaveUp  # deeper than the recursion this search may take
    if not completes(1, 0):
        return None
    order, visited = [0], 1
    while visited != full:
        choices = _bits(adjacent[order[-1]] & ~visited)
        nxt = next(u for u in choices if completes(visited | 1 << u, u))
        order.append(nxt)
        visited |= 1 << nxt
    return order


def _bits(mask: int) -> list[int]:
    out, i = [], 0
    while mask:
        if mask & 1:
            out.append(i)
        mask >>= 1
        i += 1
    return out
