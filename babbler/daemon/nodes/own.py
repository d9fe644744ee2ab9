"""This node's own info as other nodes hold it (pure): its version, and which other nodes
hold which version, so that a change is pushed to each node once and nothing is sent while
nothing changes (docs/design.md "Node info: pushed on change").

A version is (`run`, `serial`): `run` is drawn at each start, `serial` counts the changes of
the info within the run, what changes by itself (`uptime_s`) left out. A node holds a
version when it asked and was answered, or when a push to it was taken. A routed node that
does not hold the current version is pushed to, if it pushes itself (its info has a
version: an older babblerd asks by itself and refuses `push`): SETTLE after the change
when it held an older one, not before GRACE after its route appeared when it never asked
(a node whose route to us just appeared asks by itself), again after RETRY when a push
failed, at once when the node's route came back since (it does not ask again after a short
loss: nodes/book.py FLAP).
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from typing import Any

# A node whose route just appeared asks us by itself (its book asks every node whose route
# appears); pushed to only if it has not within this long, so a mesh coming up does not
# both ask and push every pair. Seconds.
GRACE = 3.0
# After a push failed (the node was not there, or refused), seconds before the next.
RETRY = 5.0
# Changes come in bursts as a node comes up (its neighbours met one by one, its cable
# addresses, its MTUs): a push waits this long after a change for the next one. Seconds.
SETTLE = 0.5
UNCHANGING = ("uptime_s", "run", "serial")  # left out of what a version covers


def content(value: dict[str, Any]) -> bytes:
    """What a version covers: the info without what changes by itself."""
    kept = {k: v for k, v in value.items() if k not in UNCHANGING}
    return json.dumps(kept, sort_keys=True, separators=(",", ":")).encode()


@dataclass
class OwnInfo:
    run: str = field(default_factory=lambda: secrets.token_hex(8))
    serial: int = 0
    changed_at: float = float("-inf")  # when `serial` last grew
    _content: bytes | None = None
    holds: dict[int, int] = field(default_factory=dict)  # node -> the serial it holds
    failed_at: dict[int, float] = field(default_factory=dict)  # node -> when a push failed
    in_flight: set[int] = field(default_factory=set)

    def stamp(self, value: dict[str, Any], now: float) -> dict[str, Any]:
        """`value` with its version; a new serial when what it covers changed."""
        now_content = content(value)
        if now_content != self._content:
            self._content, self.serial, self.changed_at = now_content, self.serial + 1, now
        return {**value, "run": self.run, "serial": self.serial}

    def held(self, node: int, serial: int) -> None:
        """`node` was given the version `serial` (an answer to its ask, or a push it took)."""
        self.holds[node] = max(serial, self.holds.get(node, 0))
        self.failed_at.pop(node, None)

    def failed(self, node: int, now: float) -> None:
        self.failed_at[node] = now

    def forget(self, known: set[int]) -> None:
        """Drop what is held of nodes the book forgot (gone for good)."""
        for book in (self.holds, self.failed_at):
            for node in [n for n in book if n not in known]:
                del book[node]

    def _due_at(self, node: int, routed_since: float) -> float | None:
        if self.serial == 0 or node in self.in_flight or self.holds.get(node, 0) >= self.serial:
            return None
        at = self.changed_at + SETTLE
        if node not in self.holds:
            at = max(at, routed_since + GRACE)
        failed = self.failed_at.get(node)
        if failed is not None and failed >= routed_since:  # not since its route came back
            at = max(at, failed + RETRY)
        return at

    def due(self, routed: dict[int, float], now: float) -> list[int]:
        """Nodes to push to now, of `routed` (node -> since when it is routed)."""
        return [
            node
            for node, since in routed.items()
            if (at := self._due_at(node, since)) is not None and at <= now
        ]

    def next_due(self, routed: dict[int, float]) -> float | None:
        times = [at for node, s in routed.items() if (at := self._due_at(node, s)) is not None]
        return min(times, default=None)
