"""Node id collisions, told apart from echoes of our own past. Pure.

Two nodes with the same node id (a copied state file, a cloned disk, the same --node-id)
announce the same addresses. babeld shows the other one's announcements as routes into our
own range with a router id that is not ours. A route like that can also be an echo of
ourselves: every babeld start takes a new router id, and for a while (up to 16 s measured)
neighbours still hold, and pass on, our old announcements. So router ids this node used
before never count, and any other announcement counts as a collision only when it stays
reachable (metric < 65535) for `hold` seconds.

Only one of the two nodes should re-roll: the one whose babeld router id is the larger.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from ipaddress import IPv6Network
from typing import Any

from babbler.core.table import INFINITY

MIN_HOLD = 5.0
# babeld sends updates every 4 hellos and expires routes after 3.5 update intervals.
HOLD_HELLOS = 16


def hold_time(hello_interval: float) -> float:
    return max(MIN_HOLD, HOLD_HELLOS * hello_interval)


def moves(my_id: str | None, other: str) -> bool:
    """Both nodes see a collision; the one with the larger router id moves."""
    return my_id is None or my_id >= other


@dataclass
class CollisionWatch:
    hold: float
    _first_seen: dict[tuple[str, str], float] = field(default_factory=dict)

    def reset(self) -> None:
        self._first_seen.clear()

    def observe(
        self,
        route: dict[str, Any],
        my_id: str | None,
        own: IPv6Network,
        now: float,
        ours: Collection[str] = (),
    ) -> str | None:
        """Feed one route (as `state.route_view` shapes it). `ours`: router ids this node
        used before, whose announcements are echoes, never a collision. Returns the other
        router id when this node should re-roll its id, else None."""
        try:
            prefix = IPv6Network(route["prefix"] or "")
        except ValueError:
            return None
        other = route["router_id"]
        key = (str(prefix), other or "")
        reachable = route["metric"] is not None and route["metric"] < INFINITY
        mine = other == my_id or other in ours
        if not prefix.subnet_of(own) or not other or mine or not reachable:
            self._first_seen.pop(key, None)
            return None
        first = self._first_seen.setdefault(key, now)
        if now - first < self.hold:
            return None
        return str(other) if moves(my_id, other) else None

    def deadline(self, my_id: str | None) -> float | None:
        """When the earliest candidate this node would move for has been held long enough;
        None when there is none. babeld does not repeat an unchanged route (and babblerd
        drops repeats anyway), so the daemon waits for this time instead of another line."""
        times = [first + self.hold for other, first in self._ours_to_move(my_id)]
        return min(times, default=None)

    def due(self, my_id: str | None, now: float) -> str | None:
        """The other router id once a candidate has been held `hold` seconds and this node
        is the one to move (its router id is the larger), else None."""
        for other, first in self._ours_to_move(my_id):
            if now - first >= self.hold:
                return other
        return None

    def _ours_to_move(self, my_id: str | None) -> list[tuple[str, float]]:
        """(other router id, first seen) of the candidates this node would move for."""
        return [(o, first) for (_, o), first in self._first_seen.items() if moves(my_id, o)]

    def forget(self, route: dict[str, Any]) -> None:
        self._first_seen.pop((str(route["prefix"]), route["router_id"] or ""), None)
