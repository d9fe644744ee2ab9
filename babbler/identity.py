"""Who this node is: its node id, and the watch for another node using the same one.

The daemon feeds every route change to `observe`; when another router lastingly announces
our range (collision.py says when that is a collision rather than an echo), the daemon calls
`reroll`, which takes a new random id and persists it.
"""

from __future__ import annotations

from ipaddress import IPv6Network
from pathlib import Path

import structlog

from babbler.addressing import format_node_id, node_range, random_node_id
from babbler.collision import CollisionWatch, hold_time
from babbler.nodeid import NodeId, write_node_id
from babbler.state import VIEWS, Applied

log = structlog.get_logger("babbler.identity")


class Identity:
    def __init__(self, node: NodeId, state_dir: Path, hello_interval: float) -> None:
        self.node = node
        self._state_dir = state_dir
        self._watch = CollisionWatch(hold_time(hello_interval))

    @property
    def node_id(self) -> int:
        return self.node.value

    @property
    def node_range(self) -> IPv6Network:
        return node_range(self.node.value)

    def new_babeld(self, hello_interval: float) -> None:
        """A new babeld session: what the old one saw says nothing any more."""
        self._watch = CollisionWatch(hold_time(hello_interval))

    def observe(self, applied: Applied, my_id: str | None, now: float) -> str | None:
        """Feed one applied table entry. Returns the other router's id when another node
        lastingly announces our range and this node is the one that should move."""
        if applied.entry.kind != "route":
            return None
        route = VIEWS["route"](applied.entry)
        if applied.verb == "flush":
            self._watch.forget(route)
            return None
        other = self._watch.observe(route, my_id, self.node_range, now)
        if other is not None:
            log.error(
                "node id collision: another router announces our range",
                prefix=route["prefix"],
                router_id=other,
                my_id=my_id,
            )
            self._watch.reset()
        return other

    def reroll(self) -> None:
        """Take a new random node id and persist it (a failure to persist is kept in
        `node.persist_error`)."""
        old, new = self.node.value, random_node_id()
        error = write_node_id(self._state_dir, new)
        self.node = NodeId(new, "rerolled", error)
        log.error(
            "node id changed after a collision",
            old=format_node_id(old),
            new=format_node_id(new),
            persisted=error is None,
            persist_error=error,
        )
