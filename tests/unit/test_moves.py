"""This node moving (daemon/moves.py): a foreign announcement of our range, told once and
never repeated, moves the node once its hold is over, and every follower is told in order;
IPv4's changes restart babeld and move the services on the node addresses."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

from babbler.core.table import MeshTable
from babbler.daemon.identity import Identity
from babbler.daemon.moves import Followers, Moves
from babbler.daemon.nodeid import NodeId
from tests.unit.test_identity import HELLO, NODE, applied

MINE = "ff:ff:ff:ff:ff:ff:ff:fe"  # the larger id: the hold is the shorter one
OTHER = "02:00:00:00:00:00:00:0b"


def followed(told: list[object]) -> Followers:
    async def refresh() -> None:
        told.append("refresh")

    return Followers(
        my_id=lambda: MINE,
        renumber=lambda node: told.append(("renumber", node)),
        forget_addresses=lambda: told.append("forget"),
        restart_babeld=lambda reason: told.append(("restart", reason)),
        refresh=refresh,
        publish=lambda: told.append("publish"),
    )


async def test_an_announcement_told_once_moves_the_node_after_the_hold(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    identity = Identity(NodeId(NODE, "file"), tmp_path, HELLO)
    told: list[object] = []
    moves = Moves(identity, followed(told))
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(moves.follow_collisions)
            moved = moves.moved.event()
            start = trio.current_time()
            moves.observe(applied("add", OTHER, MeshTable()))  # babeld says it once
            await moved.wait()
            held = trio.current_time() - start
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
    assert held >= 5.0  # collision.hold_time at hello 0.1 s
    assert identity.node_id != NODE
    assert told == [
        ("renumber", identity.node_id),
        "forget",
        ("restart", "node id changed"),
        "refresh",
        "publish",
    ]


async def test_ipv4_changing_restarts_babeld_and_moves_the_services(tmp_path: Path) -> None:
    told: list[object] = []
    moves = Moves(Identity(NodeId(NODE, "file"), tmp_path, HELLO), followed(told))
    moved = moves.moved.event()
    moves.ipv4_changed("IPv4 clash changed")
    assert moved.is_set()
    assert told == [("restart", "IPv4 clash changed")]
