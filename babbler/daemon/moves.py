"""This node moving, and the rooms that follow it: a node id collision (identity.py watches,
core/collision.py decides) re-rolls the node id, and IPv4's changes (on, off after a clash,
a node address moved after a collision: ipv4_service.py) move the node addresses.

Either way babeld is restarted (its router id, range and filters are fixed at start) and the
services on the node addresses (the node info server, the bench responder) start anew there
(`moved`). A new node id also renumbers IPv4, starts the address numbers over and reconciles
at once. The rooms are reached through `Followers`, a port; `Daemon` feeds `observe` every
route babeld tells and runs `follow_collisions`.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import trio

from babbler.core.table import Applied
from babbler.daemon.identity import Identity
from babbler.daemon.wakeup import Signal


@dataclass(frozen=True)
class Followers:
    """What a move reads and sets going (a port), in the order a new node id tells them."""

    my_id: Callable[[], str | None]  # the running babeld's router id (mesh.py)
    renumber: Callable[[int], None]  # IPv4's node address follows a new node id
    forget_addresses: Callable[[], None]  # the address numbers start over (reconcile.py)
    restart_babeld: Callable[[str], None]
    refresh: Callable[[], Awaitable[None]]
    publish: Callable[[], None]  # node-level events for `watch` clients


class Moves:
    def __init__(self, identity: Identity, followers: Followers) -> None:
        self._identity = identity
        self._followers = followers
        self.moved = Signal()  # the node addresses moved: services on them start anew
        self._routes = Signal()  # a route changed: a candidate's hold may start or end

    def observe(self, route: Applied) -> None:
        """A route babeld told: fed to the collision watch."""
        self._identity.observe(route, self._followers.my_id(), trio.current_time())
        self._routes.notify()

    def ipv4_changed(self, reason: str) -> None:
        """IPv4 turned on or off, or its node address moved: babeld's filters are fixed at
        start, and the services on the node addresses follow."""
        self._followers.restart_babeld(reason)
        self.moved.notify()

    async def follow_collisions(self) -> None:
        """Another node uses our node id: take a new one, re-address, restart babeld.
        Sleeps until a candidate announcement has been held long enough (or a route
        changes), so a lasting announcement counts although babeld does not repeat it."""
        identity, followers = self._identity, self._followers
        while True:
            routes = self._routes.event()
            deadline = identity.collision_deadline(followers.my_id())
            with trio.move_on_at(math.inf if deadline is None else deadline):
                await routes.wait()
            if not identity.collision_due(followers.my_id(), trio.current_time()):
                continue
            identity.reroll()
            followers.renumber(identity.node_id)
            self.moved.notify()  # serve on the new node address
            followers.forget_addresses()
            followers.restart_babeld("node id changed")
            await followers.refresh()
            followers.publish()
