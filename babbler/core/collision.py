"""Node id collisions, told apart from echoes of our own past, and who moves. Pure.

Two nodes with the same node id (a copied state file, a cloned disk, the same --node-id)
announce the same addresses. babeld shows the other one's announcements as routes into our
own range with a router id that is not ours. A route like that can also be an echo of
ourselves: every babeld start takes a new router id, and for a while (up to 16 s measured)
neighbours still hold, and pass on, our old announcements. So router ids this node ran
never count, ids of its earlier runs (the state dir keeps them) count only once their
echoes are long gone, and any other announcement counts only when it stays reachable
(metric < 65535) for `hold` seconds.

Who moves: every node that sees a lasting collision, the one with the larger router id
first. Both do not always see it: in a line the middle node announces the route it chose to
the other side only (split horizon), so only one end sees the other's node address, and
with more nodes between them neither does (what each sees then is the other's link
addresses, numbered at random for this: core/addrplan.py). So the node with the smaller
router id does not wait for the other for ever: it moves after YIELD_HOLDS holds, by when
the larger one, had it seen the collision too, has moved and retracted what it announced.

A member that announces our range could make us move again and again, and each move
breaks every connection to the node address: `Rerolls` allows a few moves in ten minutes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from ipaddress import IPv6Network
from typing import Any

from babbler.core.table import INFINITY

MIN_HOLD = 5.0
# babeld sends updates every 4 hellos and expires routes after 3.5 update intervals.
HOLD_HELLOS = 16
# The node with the smaller router id moves after this many holds: by then the other one,
# seeing the same collision at about the same time, has moved, and its babeld's planned
# stop has retracted what it announced (at once: BABELD.md); two clones at the ends of a
# 3-line are still apart within 30 s (tests/integration/test_clones.py).
YIELD_HOLDS = 2
# Router ids of this node's earlier runs are echoes this long after the first route it
# hears: neighbours forward an old id's announcements for up to 16 s after a babeld SIGKILL
# (BABELD.md, hello 0.1 s); babeld forgets a dead router's route in 17.6 s at hello 1 s and
# 68 s at 4 s. An announcement under such an id after that is another machine's: a clone
# of this disk, made while that id ran.
MIN_ECHO = 60.0
ECHO_HELLOS = 20
# A clone costs one move (two at worst, when both see it). More in ten minutes means a
# member keeps announcing our range; each move breaks every connection to the node address.
MAX_REROLLS = 3
REROLL_WINDOW = 600.0

Ours = Mapping[str, float]  # router id -> until when its announcements are our echoes


def hold_time(hello_interval: float) -> float:
    return max(MIN_HOLD, HOLD_HELLOS * hello_interval)


def echo_time(hello_interval: float) -> float:
    return max(MIN_ECHO, ECHO_HELLOS * hello_interval)


def wait(my_id: str | None, other: str, hold: float) -> float:
    """How long a collision with `other` must last before this node moves: `hold` for the
    node with the larger router id, YIELD_HOLDS x `hold` for the other."""
    return hold if my_id is None or my_id > other else YIELD_HOLDS * hold


@dataclass
class CollisionWatch:
    hold: float
    _since: dict[tuple[str, str], float] = field(default_factory=dict)  # counted from

    def reset(self) -> None:
        self._since.clear()

    def observe(
        self,
        route: dict[str, Any],
        my_id: str | None,
        own: IPv6Network,
        now: float,
        ours: Ours | None = None,
    ) -> str | None:
        """Feed one route (as `state.route_view` shapes it). `ours`: router ids this node
        used before, each with the time until which its announcements are echoes
        (math.inf: for ever). Returns the other router id when this node should re-roll
        its id, else None."""
        try:
            prefix = IPv6Network(route["prefix"] or "")
        except ValueError:
            return None
        other = route["router_id"]
        key = (str(prefix), other or "")
        reachable = route["metric"] is not None and route["metric"] < INFINITY
        echo_until = (ours or {}).get(other, -math.inf)
        mine = other == my_id or echo_until == math.inf
        if not prefix.subnet_of(own) or not other or mine or not reachable:
            self._since.pop(key, None)
            return None
        since = self._since.setdefault(key, max(now, echo_until))
        return str(other) if now >= since + wait(my_id, other, self.hold) else None

    def deadline(self, my_id: str | None) -> float | None:
        """When the earliest candidate will have lasted long enough for this node to move;
        None when there is none. babeld does not repeat an unchanged route (and babblerd
        drops repeats anyway), so the daemon waits for this time instead of another line."""
        times = [since + wait(my_id, other, self.hold) for (_, other), since in self._since.items()]
        return min(times, default=None)

    def due(self, my_id: str | None, now: float) -> str | None:
        """The other router id once a candidate has lasted long enough for this node to
        move (`wait`), else None."""
        for (_, other), since in self._since.items():
            if now >= since + wait(my_id, other, self.hold):
                return other
        return None

    def forget(self, route: dict[str, Any]) -> None:
        self._since.pop((str(route["prefix"]), route["router_id"] or ""), None)


@dataclass
class Rerolls:
    """The moves this node made: at most `limit` in any `window` seconds."""

    limit: int = MAX_REROLLS
    window: float = REROLL_WINDOW
    _times: list[float] = field(default_factory=list)

    def next_allowed(self) -> float:
        """When this node may move again (-inf: now)."""
        if len(self._times) < self.limit:
            return -math.inf
        return self._times[-self.limit] + self.window

    def spend(self, now: float) -> None:
        self._times = [*self._times[-self.limit :], now]
