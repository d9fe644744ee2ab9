"""Who moves when two nodes share a node id (core/collision.py): every node that sees a
lasting foreign announcement of its range, the one with the larger router id first; echoes
of our own past never; a few moves in ten minutes at most."""

import math
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from babbler.core.addressing import node_range
from babbler.core.collision import (
    MAX_REROLLS,
    REROLL_WINDOW,
    YIELD_HOLDS,
    CollisionWatch,
    Rerolls,
    echo_time,
    hold_time,
)

OWN = node_range(0x1A2B3C4D5E6F)
MINE = "02:00:00:00:00:00:00:0b"


def route(router_id: str, metric: int = 96, prefix: str | None = None) -> dict[str, Any]:
    return {
        "prefix": prefix or f"{OWN.network_address + 1}/128",
        "router_id": router_id,
        "metric": metric,
        "installed": False,
        "via": "fe80::1",
        "interface": "v1x2",
    }


def test_hold_and_echo_times_follow_the_hello_interval() -> None:
    assert hold_time(0.25) == 5.0
    assert hold_time(4) == 64.0
    assert echo_time(0.1) == 60.0
    assert echo_time(4) == 80.0  # babeld forgets a dead router's route in 68 s at 4 s


def test_a_lasting_foreign_announcement_of_our_range_is_a_collision() -> None:
    watch = CollisionWatch(hold=5)
    other = "02:00:00:00:00:00:00:0a"  # smaller than ours: we are the one to move
    assert watch.observe(route(other), MINE, OWN, now=100) is None
    assert watch.observe(route(other), MINE, OWN, now=104.9) is None
    assert watch.observe(route(other), MINE, OWN, now=105) == other


def test_the_node_with_the_smaller_router_id_moves_too_when_the_other_does_not() -> None:
    # In a 3-line only one end sees the other (split horizon at the middle node): when
    # that is the end with the smaller router id, it must move, only later.
    watch = CollisionWatch(hold=5)
    larger = "02:00:00:00:00:00:00:0c"
    watch.observe(route(larger), MINE, OWN, now=0)
    assert watch.observe(route(larger), MINE, OWN, now=9.9) is None
    assert watch.observe(route(larger), MINE, OWN, now=10) == larger


def test_echoes_that_go_unreachable_and_other_ranges_are_not_collisions() -> None:
    watch = CollisionWatch(hold=5)
    old_self = "02:00:00:00:00:00:00:01"
    watch.observe(route(old_self), MINE, OWN, now=0)
    watch.observe(route(old_self, metric=65535), MINE, OWN, now=3)  # retracted: start over
    assert watch.observe(route(old_self), MINE, OWN, now=6) is None
    assert watch.observe(route(old_self), MINE, OWN, now=10) is None
    assert watch.observe(route(old_self), MINE, OWN, now=11) == old_self
    elsewhere = f"{node_range(0x1).network_address + 1}/128"
    assert watch.observe(route("x", prefix=elsewhere), MINE, OWN, now=0) is None
    assert watch.observe(route("x", prefix=elsewhere), MINE, OWN, now=99) is None
    assert watch.observe(route(MINE), MINE, OWN, now=99) is None


def test_a_candidate_held_long_enough_is_due_without_another_line() -> None:
    # babeld does not repeat an unchanged route (and babblerd drops repeats): the daemon
    # wakes at `deadline` and asks `due`, instead of waiting for the route again.
    watch = CollisionWatch(hold=5)
    other = "02:00:00:00:00:00:00:0a"
    assert watch.deadline(MINE) is None
    watch.observe(route(other), MINE, OWN, now=100)
    assert watch.deadline(MINE) == 105
    assert watch.due(MINE, now=104.9) is None
    assert watch.due(MINE, now=105) == other
    assert watch.deadline("02:00:00:00:00:00:00:09") == 110  # the other one moves first
    watch.forget(route(other))
    assert watch.due(MINE, now=200) is None and watch.deadline(MINE) is None


def test_an_earlier_runs_router_id_is_an_echo_until_its_echoes_are_gone() -> None:
    # A clone of this disk holds our earlier router ids, and may still run one of them.
    watch = CollisionWatch(hold=5)
    earlier, this_run = "02:00:00:00:00:00:00:0a", "02:00:00:00:00:00:00:01"
    ours = {earlier: 60.0, this_run: math.inf}
    assert watch.observe(route(earlier), MINE, OWN, now=0, ours=ours) is None
    assert watch.observe(route(this_run), MINE, OWN, now=0, ours=ours) is None
    assert watch.deadline(MINE) == 65
    assert watch.due(MINE, now=64.9) is None
    assert watch.due(MINE, now=65) == earlier
    assert watch.observe(route(this_run), MINE, OWN, now=10_000, ours=ours) is None


router_ids = st.binary(min_size=8, max_size=8).map(lambda b: ":".join(f"{x:02x}" for x in b))


@given(
    st.lists(router_ids, min_size=2, max_size=2, unique=True),
    st.lists(st.floats(0, 100), min_size=2, max_size=2),
    st.sampled_from([(True, True), (True, False), (False, True)]),
    st.floats(0.5, 64),
)
def test_two_clones_never_wait_for_each_other_for_ever(
    ids: list[str], seen_at: list[float], sees: tuple[bool, bool], hold: float
) -> None:
    """Whoever sees the other (one end of a line, or both) moves within YIELD_HOLDS holds;
    when both see it within a hold of each other, the larger router id moves first."""
    due = {}
    for me, other, seen, at in zip(ids, ids[::-1], sees, seen_at, strict=True):
        if not seen:
            continue
        watch = CollisionWatch(hold=hold)
        watch.observe(route(other), me, OWN, now=at)
        deadline = watch.deadline(me)
        assert deadline is not None and deadline <= at + YIELD_HOLDS * hold
        assert watch.due(me, now=deadline) == other
        due[me] = deadline
    if all(sees) and abs(seen_at[0] - seen_at[1]) < (YIELD_HOLDS - 1) * hold:
        larger, smaller = sorted(ids, reverse=True)
        assert due[larger] < due[smaller]


@given(st.lists(st.floats(0, 5000), max_size=30))
def test_a_node_moves_at_most_three_times_in_ten_minutes(wanted: list[float]) -> None:
    """However often a member announces our range, the moves are capped."""
    rerolls, moved = Rerolls(), []
    for now in sorted(wanted):
        if now >= rerolls.next_allowed():
            rerolls.spend(now)
            moved.append(now)
    for start in moved:
        assert len([t for t in moved if start <= t < start + REROLL_WINDOW]) <= MAX_REROLLS
    if len(moved) == MAX_REROLLS:
        assert rerolls.next_allowed() == moved[0] + REROLL_WINDOW
