"""The mesh table: babeld's interfaces, neighbours, routes and xroutes, built from its lines.

Pure. The table is what clients are promised (DESIGN.md "Client protocol"): a consistent
stream keyed by (kind, handle), so applying a babeld line yields the line to forward, if any:
- `add` of a known key becomes `change` (or nothing, when identical);
- `change` of an unknown key becomes `add`;
- `flush` of an unknown key is dropped.
`flush_all` empties the table (babeld went away) and yields the `flush` lines for clients.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any, TypeVar

from babbler.core.babeld_lines import KINDS, TableLine

INFINITY = 0xFFFF
T = TypeVar("T")


@dataclass(frozen=True)
class Applied:
    real: bool  # the entry really changed (what `watch` reports)
    entry: TableLine  # the entry as it now stands (for a flush: as it last stood)
    verb: str
    # What `line` renders: babeld's own line, or for a flush babblerd makes (babeld gone,
    # or gone from a re-dump) the entry as it last stood.
    said: TableLine

    @cached_property
    def line(self) -> str:
        """What to forward to `monitor` clients; made only when someone monitors."""
        return self.said.render(self.verb)


class MeshTable:
    def __init__(self) -> None:
        self._entries: dict[tuple[str, str], TableLine] = {}
        self._resync: set[tuple[str, str]] | None = None  # keys a re-dump brought so far
        self.generation = 0  # grows with every change of an entry (`memo`)
        self._memo: dict[str, tuple[int, Any]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def apply(self, line: TableLine) -> Applied | None:
        key = line.key
        if self._resync is not None:
            self._resync.add(key)
        old = self._entries.get(key)
        if line.verb == "flush":
            if old is None:
                return None
            del self._entries[key]
            self.generation += 1
            return Applied(True, old, "flush", line)
        verb = "add" if old is None else "change"
        self._entries[key] = line
        if old is None or old.fields != line.fields:
            self.generation += 1
        if old is not None and line.verb == "add" and old.fields == line.fields:
            return None
        return Applied(old is None or old.fields != line.fields, line, verb, line)

    def begin_resync(self) -> None:
        """A new dump of babeld's table follows (a new control connection to the same
        babeld): remember which entries it brings."""
        self._resync = set()

    def end_resync(self) -> list[Applied]:
        """The dump is complete: flush what it no longer has (changed while we were away)."""
        seen, self._resync = self._resync, None
        if seen is None:
            return []
        gone = [e for key, e in self._entries.items() if key not in seen]
        for entry in gone:
            del self._entries[entry.key]
        self.generation += 1
        return [Applied(True, e, "flush", e) for e in gone]

    def flush_all(self) -> list[Applied]:
        gone = [Applied(True, e, "flush", e) for e in self.entries()]
        self._entries.clear()
        self.generation += 1
        return gone

    def memo(self, name: str, compute: Callable[[MeshTable], T]) -> T:
        """`compute(self)`, kept until an entry changes: a reading of the whole table that
        many callers repeat between changes (the far ends, for every node info built and
        every answer taken: O(N) each, O(N^2) a round in a 64-ring forming). The value is
        shared: callers must not change it."""
        kept = self._memo.get(name)
        if kept is not None and kept[0] == self.generation:
            return kept[1]  # type: ignore[no-any-return]
        value = compute(self)
        self._memo[name] = (self.generation, value)
        return value

    def entries(self, kind: str | None = None) -> list[TableLine]:
        """Entries in babeld's dump order: by kind, then in the order they appeared."""
        kinds = (kind,) if kind else KINDS
        return [e for k in kinds for e in self._entries.values() if e.kind == k]

    def dump_lines(self) -> list[str]:
        return [e.render("add") for e in self.entries()]


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _float(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def neighbour_view(e: TableLine) -> dict[str, Any]:
    return {
        "address": e.field("address"),
        "interface": e.field("if"),
        "reach": e.field("reach"),
        "rxcost": _int(e.field("rxcost")),
        "txcost": _int(e.field("txcost")),
        "cost": _int(e.field("cost")),
        "rtt": _float(e.field("rtt")),
    }


def route_view(e: TableLine) -> dict[str, Any]:
    return {
        "prefix": e.field("prefix"),
        "router_id": e.field("id"),
        "metric": _int(e.field("metric")),
        "refmetric": _int(e.field("refmetric")),
        "installed": e.field("installed") == "yes",
        "via": e.field("via"),
        "interface": e.field("if"),
    }


def xroute_view(e: TableLine) -> dict[str, Any]:
    return {"prefix": e.field("prefix"), "metric": _int(e.field("metric"))}


def interface_view(e: TableLine) -> dict[str, Any]:
    return {"name": e.handle, "up": e.field("up") == "true", "ipv6": e.field("ipv6")}


VIEWS = {
    "neighbour": neighbour_view,
    "route": route_view,
    "xroute": xroute_view,
    "interface": interface_view,
}


def is_usable(route: dict[str, Any]) -> bool:
    """babeld installed it and it is not a retraction (metric infinity)."""
    metric = route["metric"]
    return bool(route["installed"]) and metric is not None and metric < INFINITY
