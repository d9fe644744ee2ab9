"""The live model `top` and the web page share (pure): the mesh's nodes and cables from a
`status` answer, each cable's rate each way from two `counters` answers, and what changed
in the last HOLD seconds. No I/O and no clock of its own: the caller passes its monotonic
time in.

Names and interfaces are a peer's text, kept as they came: a renderer shows them as text
(escaped for a terminal, set as text in a page), never as markup.

Rates are bytes per second from two readings of one node, each at that node's own clock
(`at`): readings of different nodes are never compared, a counter that went down (a reset,
a link made anew) or a clock that went back is a new start, and a reading older than
STALE_S on the viewer's node gives no rate (the node stopped answering). The model holds
what the last answers hold, no more: a link an answer leaves out is forgotten, and so is a
node left out once its last reading is stale (links are a peer's names: a node could name
new ones at each answer).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from babbler.core.cablegraph import CableGraph

HOLD = 10.0  # seconds a change stays in `MeshView.changes`
STALE_S = 5.0  # a node's last reading older than this (its `age_s`) gives no rate
COUNTER_LIMIT = 2**64  # counters are unsigned 64-bit; anything else is no reading
MIN_ELAPSED = 0.01  # seconds between two readings of a node for a rate (less: one reading)


@dataclass(frozen=True)
class NodeRow:
    node_id: str
    name: str | None  # None until its info came; text, never markup
    address: str | None  # node address (IPv6)
    address_v4: str | None
    hops: int | None  # None: unreachable / unknown
    state: str  # "me", "up", "down"
    version: str | None
    info_age_s: float | None
    interface: str | None = None  # the link this node's route leaves by (None: me, lost)


@dataclass(frozen=True)
class EndRow:
    node_id: str
    name: str | None
    interface: str


@dataclass(frozen=True)
class CableRow:
    a: EndRow  # the end on the lower node id (cablegraph's `near`)
    b: EndRow
    speed_mbps: int | None  # the slower end's (None: neither says)
    mtu: int | None  # the smaller end's (None: neither says)
    a_to_b: float | None  # bytes per second now, None until two readings
    b_to_a: float | None

    @property
    def key(self) -> str:
        """The cable as a change names it: both ends' node ids and interfaces."""
        return cable_key(self.a, self.b)

    @property
    def busy(self) -> float:
        return (self.a_to_b or 0.0) + (self.b_to_a or 0.0)


@dataclass(frozen=True)
class Change:
    at: float  # the viewer's monotonic time it was seen
    kind: str  # "joined", "left", "renamed", "cable-up", "cable-down", "route-moved"
    text: str  # one line for people, e.g. "n3 joined" (holds peers' names: text, not markup)
    subject: str = ""  # the node id, or the cable's `key`, it is about


@dataclass(frozen=True)
class MeshView:
    me: str | None  # this node's id
    nodes: list[NodeRow]  # me first, then by name
    cables: list[CableRow]  # busiest first (a_to_b + b_to_a), then by names
    changes: list[Change]  # newest first, those of the last HOLD seconds


def cable_key(a: EndRow, b: EndRow) -> str:
    return f"{a.node_id}/{a.interface}-{b.node_id}/{b.interface}"


@dataclass(frozen=True)
class _Reading:
    at: float  # the node's own monotonic clock
    rx: int
    tx: int


Pair = tuple[str, str]  # (node_id, interface)


class Rates:
    """Per (node_id, interface): the last reading (that node's own `at`) and the rate."""

    def __init__(self) -> None:
        self._last: dict[Pair, _Reading] = {}
        self._rates: dict[Pair, tuple[float, float]] = {}
        self._fresh: set[str] = set()  # nodes whose reading in the last answer is recent
        # when each node's last reading arrived on the viewer's node, by its clock (the
        # answer's `at` less the node's `age_s`; None: the answer did not say)
        self._arrived: dict[str, float | None] = {}

    def update(self, counters: Mapping[str, Any]) -> None:
        """Take a `counters` answer (docs/protocol.md). Malformed entries are skipped: an
        answer holds other machines' numbers."""
        fresh: set[str] = set()
        named: set[Pair] = set()
        arrived: dict[str, float | None] = {}
        now = _number(counters.get("at"))  # the viewer's node's clock
        nodes = counters.get("nodes")
        for node in nodes if isinstance(nodes, list) else []:
            if not isinstance(node, Mapping) or not isinstance(node.get("node_id"), str):
                continue
            at, age = _number(node.get("at")), _number(node.get("age_s"))
            interfaces = node.get("interfaces")
            if at is None or not isinstance(interfaces, list):
                continue
            node_id = node["node_id"]
            arrived[node_id] = None if now is None else now - (age or 0.0)
            if age is None or age <= STALE_S:
                fresh.add(node_id)
            for item in interfaces:
                if isinstance(item, Mapping) and isinstance(item.get("name"), str):
                    named.add((node_id, item["name"]))
                    self._read(node_id, item["name"], at, item)
        self._fresh = fresh
        self._forget(named, arrived, now)

    def _forget(
        self, named: set[Pair], arrived: dict[str, float | None], now: float | None
    ) -> None:
        """Keep the pairs this answer named, and those of the nodes it left out whose last
        reading is not stale yet on the viewer's clock (`now`): a node that comes back
        within STALE_S has its rate from its last reading."""
        waiting = {
            node_id: then
            for node_id, then in self._arrived.items()
            if node_id not in arrived and _within_stale(then, now)
        }

        def kept(pair: Pair) -> bool:
            return pair in named or pair[0] in waiting

        self._last = {pair: last for pair, last in self._last.items() if kept(pair)}
        self._rates = {pair: rate for pair, rate in self._rates.items() if kept(pair)}
        self._arrived = arrived | waiting

    def remembered(self) -> set[Pair]:
        """Every (node_id, interface) the model holds something of: what bounds its memory."""
        return set(self._last) | set(self._rates)

    def _read(self, node_id: str, interface: str, at: float, item: Mapping[str, Any]) -> None:
        rx, tx = _counter(item.get("rx_bytes")), _counter(item.get("tx_bytes"))
        if rx is None or tx is None:
            return
        key = (node_id, interface)
        last = self._last.get(key)
        if last is not None and 0 <= at - last.at < MIN_ELAPSED:
            return  # the same reading again (the node was not asked since): the rate stands
        self._last[key] = _Reading(at, rx, tx)
        if last is None or at < last.at or rx < last.rx or tx < last.tx:
            self._rates.pop(key, None)  # a new start: a reset counter or a restarted clock
            return
        elapsed = at - last.at
        self._rates[key] = ((rx - last.rx) / elapsed, (tx - last.tx) / elapsed)

    def rate(self, node_id: str, interface: str) -> tuple[float, float] | None:
        """(rx, tx) bytes per second, or None: fewer than two readings, a new start, or
        the node's last reading not in the last answer or older than STALE_S."""
        if node_id not in self._fresh:
            return None
        return self._rates.get((node_id, interface))


class Changes:
    """What changed, from consecutive MeshViews, kept HOLD seconds."""

    def __init__(self) -> None:
        self._seen: list[Change] = []  # oldest first

    def feed(self, previous: MeshView | None, current: MeshView, now: float) -> None:
        """Note what differs from `previous` to `current` as seen at `now` (nothing for
        the first view: what is there at the start is no change)."""
        if previous is not None:
            self._seen.extend(diff(previous, current, now))
        self._seen = [c for c in self._seen if now - c.at < HOLD]

    def recent(self, now: float) -> list[Change]:
        """The changes of the last HOLD seconds (at <= now < at + HOLD), newest first (those
        seen together in the order `diff` gives)."""
        kept = [c for c in self._seen if 0 <= now - c.at < HOLD]
        return sorted(kept, key=lambda c: -c.at)


def diff(previous: MeshView, current: MeshView, now: float) -> list[Change]:
    """The changes from one view to the next: nodes that joined, left, were renamed or whose
    route moved, and cables that came or went."""
    out: list[Change] = []
    before = {n.node_id: n for n in previous.nodes}
    for node in current.nodes:
        old = before.get(node.node_id)
        label = node.name or node.node_id
        if node.state == "me":
            continue
        if node.state == "up" and (old is None or old.state == "down"):
            out.append(Change(now, "joined", f"{label} joined", node.node_id))
        elif node.state == "down" and old is not None and old.state == "up":
            out.append(Change(now, "left", f"{label} left", node.node_id))
        elif old is not None and node.state == "up" and _moved(old, node):
            hops = f", {node.hops} hops" if node.hops is not None else ""
            where = f"by {node.interface}{hops}" if node.interface else "lost, rerouting"
            out.append(Change(now, "route-moved", f"route to {label} {where}", node.node_id))
        if old is not None and old.name and node.name and old.name != node.name:
            out.append(Change(now, "renamed", f"{old.name} is now {node.name}", node.node_id))
    now_there = {n.node_id for n in current.nodes}
    for old in previous.nodes:
        if old.node_id not in now_there and old.state == "up":
            out.append(Change(now, "left", f"{old.name or old.node_id} left", old.node_id))
    cables_before = {c.key: c for c in previous.cables}
    cables_now = {c.key: c for c in current.cables}
    for key, cable in cables_now.items():
        if key not in cables_before:
            out.append(Change(now, "cable-up", f"cable {_ends(cable)} came", key))
    for key, cable in cables_before.items():
        if key not in cables_now:
            out.append(Change(now, "cable-down", f"cable {_ends(cable)} gone", key))
    return out


def _moved(old: NodeRow, new: NodeRow) -> bool:
    return (old.interface, old.hops) != (new.interface, new.hops)


def _ends(cable: CableRow) -> str:
    a, b = cable.a, cable.b
    return f"{a.name or a.node_id} {a.interface} - {b.name or b.node_id} {b.interface}"


def view(status: Mapping[str, Any], rates: Rates, changes: list[Change]) -> MeshView:
    """The mesh as `status` (docs/protocol.md) and the rates show it."""
    me = _text(status.get("node_id"))
    rows = [_my_row(status)] if me is not None else []
    links: dict[str, dict[str, Mapping[str, Any]]] = {}
    if me is not None:
        links[me] = _by_name(status.get("interfaces"))
    for node in _list(status.get("nodes")):
        ident = _text(node.get("node_id"))
        if ident is None or ident == me:
            continue
        rows.append(_node_row(ident, node))
        links[ident] = _by_name(node.get("links"))
    rows[1:] = sorted(rows[1:], key=lambda r: (r.name is None, r.name or "", r.node_id))
    up = {r.node_id for r in rows if r.state != "down"}
    cables = _cables(status, rows, up, links, rates) if me is not None else []
    return MeshView(me, rows, cables, list(changes))


def _my_row(status: Mapping[str, Any]) -> NodeRow:
    return NodeRow(
        node_id=str(status["node_id"]),
        name=_text(status.get("name")) or None,
        address=_text(status.get("node_address")),
        address_v4=_text(status.get("node_address_v4")),
        hops=0,
        state="me",
        version=_text(status.get("version")),
        info_age_s=None,
    )


def _node_row(ident: str, node: Mapping[str, Any]) -> NodeRow:
    reachable = node.get("reachable") is True
    hops = node.get("hops")
    return NodeRow(
        node_id=ident,
        name=_text(node.get("name")) or None,
        address=_text(node.get("node_address")),
        address_v4=_text(node.get("node_address_v4")),
        hops=hops if isinstance(hops, int) and not isinstance(hops, bool) and reachable else None,
        state="up" if reachable else "down",
        version=_text(node.get("version")),
        info_age_s=_number(node.get("info_age_s")),
        interface=_text(node.get("interface")) if reachable else None,
    )


def _cables(
    status: Mapping[str, Any],
    rows: list[NodeRow],
    up: set[str],
    links: dict[str, dict[str, Mapping[str, Any]]],
    rates: Rates,
) -> list[CableRow]:
    """Every cable both of whose ends are on reachable nodes, busiest first."""
    names = {r.node_id: r.name for r in rows}
    out = []
    for pair in CableGraph.from_status(status).cables.values():
        for cable in pair:
            a, b = cable.near, cable.far
            if a.node_id not in up or b.node_id not in up:
                continue
            link_a = links.get(a.node_id, {}).get(a.interface, {})
            link_b = links.get(b.node_id, {}).get(b.interface, {})
            out.append(
                CableRow(
                    EndRow(a.node_id, names.get(a.node_id), a.interface),
                    EndRow(b.node_id, names.get(b.node_id), b.interface),
                    _least(link_a.get("speed_mbps"), link_b.get("speed_mbps")),
                    _least(link_a.get("mtu"), link_b.get("mtu")),
                    _way(rates, (a.node_id, a.interface), (b.node_id, b.interface)),
                    _way(rates, (b.node_id, b.interface), (a.node_id, a.interface)),
                )
            )
    out.sort(key=lambda c: (-c.busy, _end_sort(c.a), _end_sort(c.b)))
    return out


def _way(rates: Rates, sender: tuple[str, str], receiver: tuple[str, str]) -> float | None:
    """Bytes per second from one end to the other: the sender's tx, else the receiver's rx."""
    sent = rates.rate(*sender)
    if sent is not None:
        return sent[1]
    received = rates.rate(*receiver)
    return received[0] if received is not None else None


def _end_sort(end: EndRow) -> tuple[str, str, str]:
    return (end.name or "", end.node_id, end.interface)


def _least(a: object, b: object) -> int | None:
    known = [v for v in (a, b) if isinstance(v, int) and not isinstance(v, bool) and v > 0]
    return min(known) if known else None


def _by_name(links: object) -> dict[str, Mapping[str, Any]]:
    return {str(link["name"]): link for link in _list(links) if isinstance(link.get("name"), str)}


def _list(value: object) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if value == value and abs(value) != float("inf") else None


def _within_stale(then: float | None, now: float | None) -> bool:
    return then is not None and now is not None and 0 <= now - then <= STALE_S


def _counter(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if 0 <= value < COUNTER_LIMIT else None


def as_json(mesh: MeshView) -> dict[str, Any]:
    """The view as JSON for the page: dataclasses as objects, cables with their key."""
    out = dataclasses.asdict(mesh)
    for row, cable in zip(out["cables"], mesh.cables, strict=True):
        row["key"] = cable.key
    return out


class Live:
    """A viewer's whole model: feed it each poll's `status` and `counters` answers (None:
    not had) with the viewer's monotonic time; it keeps the rates and the changes."""

    def __init__(self) -> None:
        self.rates = Rates()
        self.changes = Changes()
        self.last: MeshView | None = None

    def step(
        self, status: Mapping[str, Any], counters: Mapping[str, Any] | None, now: float
    ) -> MeshView:
        if counters is not None:
            self.rates.update(counters)
        current = view(status, self.rates, [])
        self.changes.feed(self.last, current, now)
        self.last = current
        return dataclasses.replace(current, changes=self.changes.recent(now))
