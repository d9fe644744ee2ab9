from typing import Any

from babbler.core.addressing import node_range
from babbler.core.collision import CollisionWatch, hold_time

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


def test_hold_time_follows_the_hello_interval() -> None:
    assert hold_time(0.25) == 5.0
    assert hold_time(4) == 64.0


def test_a_lasting_foreign_announcement_of_our_range_is_a_collision() -> None:
    watch = CollisionWatch(hold=5)
    other = "02:00:00:00:00:00:00:0a"  # smaller than ours: we are the one to move
    assert watch.observe(route(other), MINE, OWN, now=100) is None
    assert watch.observe(route(other), MINE, OWN, now=104.9) is None
    assert watch.observe(route(other), MINE, OWN, now=105) == other


def test_only_the_node_with_the_larger_router_id_moves() -> None:
    watch = CollisionWatch(hold=5)
    larger = "02:00:00:00:00:00:00:0c"
    watch.observe(route(larger), MINE, OWN, now=0)
    assert watch.observe(route(larger), MINE, OWN, now=10) is None


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
    assert watch.deadline("02:00:00:00:00:00:00:09") is None  # the other one moves, not us
    watch.forget(route(other))
    assert watch.due(MINE, now=200) is None and watch.deadline(MINE) is None
