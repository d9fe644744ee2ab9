"""How babeld's table is read (core/readpolicy.py): a table of cases."""

from __future__ import annotations

import math

import pytest

from babbler.core.readpolicy import Read, Reading, next_read

GRACE, DUMP = 5.0, 1.0  # the daemon's numbers


def reading(
    watched: bool = False,
    unwatched_since: float = 0.0,
    monitoring: bool = True,
    next_dump: float = 0.0,
    hello: float = 0.1,
) -> Reading:
    return Reading(watched, unwatched_since, monitoring, next_dump, hello)


CASES = [
    # (what, state, now, expected)
    ("a watcher, monitoring: nothing to do", reading(watched=True), 100.0, (Read.WAIT, math.inf)),
    ("a watcher, dumping: monitor again", reading(watched=True, monitoring=False), 100.0,
     (Read.MONITOR, 100.0)),
    ("nobody, within the grace: wait for it", reading(unwatched_since=98.0), 100.0,
     (Read.WAIT, 103.0)),
    ("nobody, grace over: unmonitor", reading(unwatched_since=95.0), 100.0,
     (Read.UNMONITOR, 100.0)),
    ("nobody, dumping, dump due: dump", reading(monitoring=False, next_dump=99.5), 100.0,
     (Read.DUMP, 100.0)),
    ("nobody, dumping, dump not due: wait", reading(monitoring=False, next_dump=100.4), 100.0,
     (Read.WAIT, 100.4)),
    ("slow hellos: dumping costs more, monitor", reading(monitoring=False, hello=0.5), 100.0,
     (Read.MONITOR, 100.0)),
    ("slow hellos, monitoring: stay", reading(unwatched_since=0.0, hello=4.0), 100.0,
     (Read.WAIT, math.inf)),
    ("hello at a quarter of the interval still pays", reading(unwatched_since=0.0, hello=0.25),
     100.0, (Read.UNMONITOR, 100.0)),
]  # fmt: skip


@pytest.mark.parametrize(("what", "state", "now", "expected"), CASES, ids=[c[0] for c in CASES])
def test_next_read(what: str, state: Reading, now: float, expected: tuple[Read, float]) -> None:
    assert next_read(state, now, GRACE, DUMP) == expected


def test_unmonitor_is_followed_by_a_dump_then_a_wait() -> None:
    """The sequence the supervisor walks when the grace ends."""
    state = reading(unwatched_since=0.0)
    assert next_read(state, 10.0, GRACE, DUMP)[0] is Read.UNMONITOR
    state = reading(monitoring=False, next_dump=10.0)
    assert next_read(state, 10.0, GRACE, DUMP)[0] is Read.DUMP
    state = reading(monitoring=False, next_dump=11.0)
    assert next_read(state, 10.0, GRACE, DUMP) == (Read.WAIT, 11.0)
