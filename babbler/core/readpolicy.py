"""How babblerd reads babeld's table (pure): babeld's `monitor` stream while anyone watches,
else a `dump` every `dump_interval` seconds, and which to do next.

babeld notifies every route it holds about once per hello; writing that stream cost babeld
1.5x / 1.7x / 2.4x its own CPU at 8 / 16 / 32 nodes (bench/monitor_cost.py, hello 0.1 s).
So while no `monitor` or `watch` client has been connected for `grace` seconds, babeld is
told `unmonitor` and the table is read with a dump every `dump_interval` seconds instead,
only where that is cheaper: hello intervals up to a quarter of the dump interval (babeld
sends an update every 4 hellos). The first watcher brings `monitor` back. How far apart
the dumps are (a second, or seldom while no route moves) is the supervisor's (mesh.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum


class Read(Enum):
    MONITOR = "monitor"  # ask babeld to stream its changes (its snapshot comes first)
    UNMONITOR = "unmonitor"  # stop the stream; the table is dumped from now on
    DUMP = "dump"  # read the whole table once
    WAIT = "wait"  # nothing until `until` (or until a watcher comes or goes)


@dataclass(frozen=True)
class Reading:
    """Where the reading stands."""

    watched: bool  # a `monitor` or `watch` client is connected
    unwatched_since: float  # when the last one left (or the connection began)
    monitoring: bool  # babeld streams its changes now
    next_dump: float  # when the next dump is due while not monitoring
    hello_interval: float  # seconds, as babeld was told


def next_read(state: Reading, now: float, grace: float, dump_interval: float) -> tuple[Read, float]:
    """What to do now, and for WAIT until when (math.inf: until a watcher comes or goes)."""
    dumping_pays = state.hello_interval * 4 <= dump_interval
    if state.watched or not dumping_pays:
        return (Read.WAIT, math.inf) if state.monitoring else (Read.MONITOR, now)
    if state.monitoring:
        ends = state.unwatched_since + grace
        return (Read.WAIT, ends) if now < ends else (Read.UNMONITOR, now)
    if now >= state.next_dump:
        return Read.DUMP, now
    return Read.WAIT, state.next_dump
