"""What a link costs babeld (its `rxcost`), from the link's speed. Pure.

babeld adds link costs along a path and picks the cheapest path; on wired links a link's
cost is the larger of the two ends' rxcost, and both ends of a cable see the same speed,
so a speed-derived cost is one both ends agree on. The formula:

    cost = 32 * 4 ** log10(10000 / speed_mbps), clamped to [MIN_COST, MAX_COST]

10 Gb/s costs 32, each tenfold slower link costs four times more: 1 Gb/s 128, 100 Mb/s 512,
10 Mb/s 2048; 40 Gb/s costs 14. So a direct 10 Gb/s (or Thunderbolt) link, and a path of up
to three such hops (96), beats one 1 Gb/s hop (128); a fourth fast hop ties it, since every
hop adds latency. A slow link is still used when it is the only way (babeld takes any
finite cost). Thunderbolt that reports no speed counts as 10 Gb/s; any other link that
reports none costs babeld's wired default, 96. `--cost GLOB=N` overrides by name.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Sequence

from babbler.core.links import Link

REFERENCE_MBPS = 10_000
REFERENCE_COST = 32
FACTOR_PER_DECADE = 4  # ten times slower costs four times more
UNKNOWN_COST = 96  # babeld's own default rxcost on wired links
THUNDERBOLT_MBPS = 10_000  # Thunderbolt networking that reports no speed
MIN_COST = 8
MAX_COST = 8192
# babeld's metric infinity is 65535: a cost must stay below it.
MAX_OVERRIDE = 65534

Overrides = Sequence[tuple[str, int]]


def speed_cost(speed_mbps: int) -> int:
    """The cost of a link of this speed (megabits per second, > 0)."""
    decades = math.log10(REFERENCE_MBPS / speed_mbps)
    cost = REFERENCE_COST * math.pow(FACTOR_PER_DECADE, decades)
    return max(MIN_COST, min(MAX_COST, round(cost)))


def effective_speed(link: Link) -> int | None:
    """The speed the cost is derived from: the reported one, else fast for Thunderbolt."""
    if link.speed_mbps is not None and link.speed_mbps > 0:
        return link.speed_mbps
    return THUNDERBOLT_MBPS if link.is_thunderbolt else None


def link_cost(link: Link, overrides: Overrides = ()) -> int:
    """The rxcost babeld gets for this link: the first matching override, else by speed."""
    for pattern, cost in overrides:
        if fnmatch.fnmatchcase(link.name, pattern):
            return cost
    speed = effective_speed(link)
    return UNKNOWN_COST if speed is None else speed_cost(speed)
