"""Who this node is: its node id, babeld's router ids, and the watch for another node using
the same node id.

Router ids: babblerd picks a fresh random one for every babeld start (as babeld's own random
id would be: a persistent one risks babeld's stale-seqno trap after a crash) and writes it
into babeld's -c file. The id the next babeld will use is known in advance, so the header's
`my-id` is never zeros. The last KEEP_ROUTER_IDS ids are kept in `<state-dir>/router-ids`:
announcements of our range under an id this process ran are our own echoes, never a
collision; under an id of an earlier run, only for a while (collision.echo_time), since a
clone of this machine's disk holds those ids too and may still run one of them.

moves.py feeds every route change to `observe`; when another router lastingly announces
our range (collision.py says when), it calls `reroll`, which takes a new random node id
and persists it, at most MAX_REROLLS times in REROLL_WINDOW, and sets what follows going.
"""

from __future__ import annotations

import math
from functools import lru_cache
from ipaddress import IPv6Network
from pathlib import Path

import structlog

from babbler.core.addressing import format_node_id, node_range, random_node_id
from babbler.core.collision import (
    MAX_REROLLS,
    REROLL_WINDOW,
    CollisionWatch,
    Ours,
    Rerolls,
    echo_time,
    hold_time,
)
from babbler.core.table import VIEWS, Applied
from babbler.daemon import routerids
from babbler.daemon.nodeid import NodeId, write_node_id
from babbler.daemon.routerids import KEEP_ROUTER_IDS, random_router_id, read_router_ids

log = structlog.get_logger("babbler.identity")


@lru_cache(maxsize=65536)
def in_range(prefix: str, node_id: int) -> bool:
    """Whether a route's prefix lies in this node's range. Cached: a converging 64-ring
    changes every route many times a second, and parsing each prefix anew was half of
    babblerd's CPU there (py-spy)."""
    try:
        return IPv6Network(prefix).subnet_of(node_range(node_id))
    except ValueError:
        return False


def write_router_ids(state_dir: Path, ids: list[str]) -> None:
    """Keep the ids; a state dir that cannot be written keeps them in memory only."""
    error = routerids.write(state_dir, ids)
    if error:
        log.warning("cannot keep router ids", error=error)


class Identity:
    def __init__(self, node: NodeId, state_dir: Path, hello_interval: float) -> None:
        self.node = node
        self._state_dir = state_dir
        self._watch = CollisionWatch(hold_time(hello_interval))
        self._echo_time = echo_time(hello_interval)
        self.used_router_ids = read_router_ids(state_dir)[-KEEP_ROUTER_IDS:]
        self._earlier = set(self.used_router_ids)  # of earlier runs, or of a clone's
        self._ran: set[str] = set()  # ids this process's babelds ran: ours for ever
        self._first_heard: float | None = None  # the first route babeld told
        self._rerolls = Rerolls()
        self._capped_until = -math.inf  # the cap's end the log has told
        self.next_router_id = random_router_id()

    def take_router_id(self) -> str:
        """The router id for the babeld about to start; remembered as ours."""
        router_id, self.next_router_id = self.next_router_id, random_router_id()
        self._ran.add(router_id)
        self.used_router_ids = [*self.used_router_ids, router_id][-KEEP_ROUTER_IDS:]
        write_router_ids(self._state_dir, self.used_router_ids)
        return router_id

    @property
    def node_id(self) -> int:
        return self.node.value

    @property
    def node_range(self) -> IPv6Network:
        return node_range(self.node.value)

    def new_babeld(self, hello_interval: float) -> None:
        """A new babeld session: what the old one saw says nothing any more."""
        self._watch = CollisionWatch(hold_time(hello_interval))

    def observe(self, applied: Applied, my_id: str | None, now: float) -> None:
        """Feed one applied table entry: a route into our range from a router id that is
        not ours starts (or keeps) a candidate; `collision_due` says when it has lasted."""
        if my_id is not None:
            self._ran.add(my_id)  # also the early-started babeld's, adopted
        if self._first_heard is None:
            self._first_heard = now  # earlier runs' echoes come from here on
        heard = self._first_heard
        prefix = applied.entry.field("prefix") or ""
        if applied.entry.kind != "route" or not in_range(prefix, self.node.value):
            return  # nearly every route: another node's range, never a candidate
        route = VIEWS["route"](applied.entry)
        if applied.verb == "flush":
            self._watch.forget(route)
            return
        self._watch.observe(route, my_id, self.node_range, now, self._ours(heard))

    def _ours(self, heard: float) -> Ours:
        """Our router ids, each with the time until which its announcements are echoes:
        this process's for ever, earlier runs' for `echo_time` after the first route."""
        earlier = heard + self._echo_time
        return {i: math.inf if i in self._ran else earlier for i in self._earlier | self._ran}

    def collision_deadline(self, my_id: str | None) -> float | None:
        """When a lasting announcement of our range by another router would be due (and
        this node may move again)."""
        deadline = self._watch.deadline(my_id)
        return None if deadline is None else max(deadline, self._rerolls.next_allowed())

    def collision_due(self, my_id: str | None, now: float) -> bool:
        """Whether to re-roll now: another router lastingly announces our range, and this
        node has not moved MAX_REROLLS times in the last REROLL_WINDOW seconds."""
        other = self._watch.due(my_id, now)
        if other is None:
            return False
        allowed = self._rerolls.next_allowed()
        if now < allowed:
            if allowed != self._capped_until:  # once per cap
                self._capped_until = allowed
                log.error(
                    "node id collision again: not moving, re-rolls are capped; another node"
                    " keeps announcing our range (find it in `babblerctl dump`)",
                    router_id=other,
                    my_id=my_id,
                    rerolls=MAX_REROLLS,
                    window_s=REROLL_WINDOW,
                    next_in_s=round(allowed - now, 1),
                )
            return False
        log.error(
            "node id collision: another router announces our range",
            router_id=other,
            my_id=my_id,
        )
        self._rerolls.spend(now)
        self._watch.reset()
        return True

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
