"""The other nodes of the mesh, by machine: which are routed, what their node info said, and
when to ask them again. Pure: the daemon feeds routes and answers, and asks `due()` whom to
fetch; `view()` is `status.nodes`, `events()` the `watch` events between two views.

Answers come checked (checked.py): every field the book reads has its documented type.

A node is routed when babeld has a usable route to its node address (range | 0, which every
babblerd announces while its mesh runs). It is asked for its info when that route appears.
A node whose answer carries a version (`run`, `serial`: nodes/own.py) pushes its info
itself each time it changes, so it is asked again only when its route comes back after
FLAP seconds or more, or an ask failed; an older answer is never taken over a newer one. A
node without versions (an older babblerd) is asked again every REFRESH seconds; a failed
ask, or an answer given while the node was still learning its neighbours, is retried after
RETRY seconds; a node still starting, or whose answer disagrees with another node's about a
neighbour, sooner (STARTING, DOUBTED). A node that loses its route stays listed,
unreachable, for FORGET seconds (a cable pulled and put back keeps its name), then is
forgotten.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from ipaddress import IPv6Network
from typing import Any

from babbler.core.addressing import format_node_id, node_address, node_id_of
from babbler.core.nodediff import node_changes
from babbler.core.table import is_usable

REFRESH = 60.0
RETRY = 5.0
FORGET = 600.0
# A node whose own links changed (a link address of its range appeared or went) is asked
# again this long after: its answer names its neighbours, which the picture and `path` are
# made of; without this they were up to REFRESH old after a cable was pulled. Long enough
# for the node's babeld to have dropped the neighbours of the link, short beside REFRESH.
RELINKED = 1.0
# Two nodes whose infos disagree (one lists the other as a neighbour, the other does not) are
# both asked again: one answered before that cable came or after it went. Nodes started one
# by one, as a cluster boots, leave such answers behind (node 2 asked before node 3 came up
# beside it), and without this they stood for REFRESH. The first re-ask is DOUBTED after
# the last answer, then the gap doubles up to REFRESH while they keep disagreeing (a link
# one end sees and the other does not is not asked about every second for ever).
DOUBTED = 1.0
# A node that answered while it was starting (its `uptime_s` under STARTING) may not have
# met all its neighbours yet, and two such nodes, both asked before they met, do not
# disagree: each lists neither. So a young answer is asked again after half the node's
# uptime (at least DOUBTED): about six asks in its first half minute, then REFRESH. babeld
# meets a neighbour within a few hellos (well under a second at hello 0.1, seconds at
# babeld's default 4 s); the rest of the 30 s is for a machine slow to bring its links up.
STARTING = 30.0
# A node that pushes (its info has a version) whose route comes back within this long of
# going is not asked again: it pushes whatever version we lack as its own route to us comes
# back (nodes/own.py). On a 64-ring churning on 2 cores, routes came and went every few
# seconds and the asks on each return were 740-800 a node in 4 minutes, each one an answer
# built by the other node. Longer than that churn's gaps; a node that restarted within it
# (a new run) pushes its new info GRACE (own.py) after its route is back. Seconds.
FLAP = 5.0

# What status.nodes[].links says of each link, from the node's info (mtu and max_mtu: None
# from a babblerd that does not say them).
LINK_KEYS = ("name", "kind", "speed_mbps", "cost", "mtu", "max_mtu")


@dataclass
class Known:
    """One other node as this one knows it."""

    node_id: int
    route: dict[str, Any] | None = None  # the usable route to its node address, if any
    info: dict[str, Any] | None = None  # its last answer
    fetched_at: float | None = None  # when `info` came
    asked_at: float | None = None  # when it was last asked (answered or not)
    error: str | None = None  # why the last ask failed
    lost_at: float | None = None  # when its route went away
    in_flight: bool = False  # being asked now
    links: frozenset[str] = frozenset()  # the routed addresses of its range (its links)
    relinked_at: float | None = None  # when `links` last changed after it had answered
    doubted_at: float | None = None  # when its info was last found to disagree with another's
    doubts: int = 0  # answers in a row that disagreed (the back-off of asking again)
    routed_at: float = 0.0  # when its route last appeared
    missed: bool = False  # it pushed while not routed here (refused): ask when routed again


def routed(routes: list[dict[str, Any]]) -> dict[int, tuple[dict[str, Any], frozenset[str]]]:
    """Node id -> (the usable route to its node address, every usable /128 route inside its
    range: its node address and one address per link it has up, a link going down taking
    its address's route with it), from `status.routes`-like views. One pass; only nodes
    whose node address is routed."""
    to_node: dict[int, dict[str, Any]] = {}
    links: dict[int, set[str]] = {}
    for route in routes:
        prefix = route.get("prefix")
        if not prefix or not is_usable(route):
            continue
        of = _node_of(prefix)
        if of is None:
            continue
        node, is_node_address = of
        links.setdefault(node, set()).add(prefix)
        if is_node_address:
            to_node[node] = route
    return {node: (route, frozenset(links[node])) for node, route in to_node.items()}


def concerns(prefix: str) -> bool:
    """Whether a route to `prefix` is one `routed` reads (a /128 inside a node's range)."""
    return _node_of(prefix) is not None


@lru_cache(maxsize=65536)
def _node_of(prefix: str) -> tuple[int, bool] | None:
    """(node id, whether it is the node address) of a /128 inside a node range, else None.
    Cached: the same few hundred prefixes come on every route change of a large mesh."""
    try:
        network = IPv6Network(prefix, strict=False)
    except ValueError:
        return None
    node = node_id_of(network.network_address)
    if node is None or network.prefixlen != 128:
        return None
    return node, network.network_address == node_address(node)


def _neighbours(info: dict[str, Any] | None) -> list[dict[str, Any]]:
    listed = (info or {}).get("neighbours")
    return [n for n in listed if isinstance(n, dict)] if isinstance(listed, list) else []


def _incomplete(info: dict[str, Any] | None) -> bool:
    """An answer given while the node was still learning its neighbours: one not yet named
    (no route from it yet), or, with IPv4 on, a neighbour without its cable address yet.
    Hostfiles are made of these, so such a node is asked again after RETRY, not REFRESH."""
    listed = _neighbours(info)
    if any(n.get("node_id") is None for n in listed):
        return True
    return (info or {}).get("node_address_v4") is not None and len(_cables(info)) < len(listed)


def _pushes(info: dict[str, Any] | None) -> bool:
    """A babblerd that pushes its info when it changes (its answer carries a version)."""
    return isinstance((info or {}).get("serial"), int)


def _older(info: dict[str, Any], held: dict[str, Any] | None) -> bool:
    """`info` is an older version of the same run than `held`."""
    if not _pushes(info) or not _pushes(held) or held is None:
        return False
    return bool(info.get("run") == held.get("run") and info["serial"] < held["serial"])


def _cables(info: dict[str, Any] | None) -> list[dict[str, str]]:
    """Its cable addresses as its info lists them: `{interface, address, peer}`, strings."""
    listed = (info or {}).get("cables")
    keys = ("interface", "address", "peer")
    return [
        {k: c[k] for k in keys}
        for c in (listed if isinstance(listed, list) else [])
        if isinstance(c, dict) and all(isinstance(c.get(k), str) for k in keys)
    ]


@dataclass
class NodeBook:
    me: int
    nodes: dict[int, Known] = field(default_factory=dict)
    # A node without a usable route stays `reachable` this long (config.down_hold): routes
    # come back around a pulled cable within it, and nobody should see the node go.
    hold: float = 1.0
    stopped: bool = False  # the mesh stopped: no route is coming back, nothing is held

    def _held(self, known: Known, now: float) -> bool:
        """Routed now, or lost less than `hold` ago: what `reachable` says."""
        return known.route is not None or (
            not self.stopped and known.lost_at is not None and now - known.lost_at < self.hold
        )

    def update_routes(self, routes: list[dict[str, Any]], now: float) -> None:
        live = routed(routes)
        live.pop(self.me, None)
        for node, (route, links) in live.items():
            known = self.nodes.setdefault(node, Known(node))
            if known.route is None:  # (re)appeared: ask at once, unless it pushes (FLAP)
                known.routed_at = now
                if not self._pushes_back(known, now):
                    known.asked_at = None
            elif links != known.links and known.fetched_at is not None:
                known.relinked_at = now
            known.route, known.lost_at, known.links = route, None, links
        for known in self.nodes.values():
            if known.node_id not in live and known.route is not None:
                known.route, known.lost_at = None, now
        self.expire(now)

    @staticmethod
    def _pushes_back(known: Known, now: float) -> bool:
        """A node back within FLAP whose last ask went well and whose info has a version:
        it pushes what changed while its route was gone. Not one whose push came while it
        was gone: refused here, yet counted as delivered by the pusher (the reply is `ok`)."""
        gone = known.lost_at
        fine = known.error is None and known.fetched_at is not None and _pushes(known.info)
        return fine and not known.missed and gone is not None and now - gone < FLAP

    def expire(self, now: float) -> None:
        """Forget the nodes whose route has been gone FORGET seconds."""
        for known in list(self.nodes.values()):
            if known.lost_at is not None and now - known.lost_at >= FORGET:
                del self.nodes[known.node_id]

    @staticmethod
    def _due_at(known: Known) -> float | None:
        """When to ask this node next: at once (-inf), at a time, or None (not routed)."""
        if known.route is None or known.in_flight:
            return None
        if known.asked_at is None:
            return float("-inf")
        if known.error is not None:
            return known.asked_at + RETRY
        if known.fetched_at is not None and _pushes(known.info):
            return None  # it says when it changes
        if known.fetched_at is not None:
            # An answer that could not yet name all its neighbours (asked as the mesh came
            # up) is asked again soon: the picture of the mesh is made of these names.
            at = known.fetched_at + (RETRY if _incomplete(known.info) else REFRESH)
            if known.relinked_at is not None and known.relinked_at >= known.asked_at:
                at = min(at, known.relinked_at + RELINKED)
            if known.doubted_at is not None:
                gap = min(REFRESH, DOUBTED * 2 ** (known.doubts - 1))
                at = min(at, max(known.doubted_at, known.fetched_at + gap))
            uptime = (known.info or {}).get("uptime_s")
            if isinstance(uptime, int | float) and 0 <= uptime < STARTING:
                at = min(at, known.fetched_at + max(DOUBTED, uptime / 2))
            return at
        return None

    def due(self, now: float) -> list[int]:
        """Routed nodes to ask now."""
        return [
            known.node_id
            for known in self.nodes.values()
            if (at := self._due_at(known)) is not None and at <= now
        ]

    def next_due(self) -> float | None:
        """When `due` will next name a node (None: only a route change will)."""
        times = [at for known in self.nodes.values() if (at := self._due_at(known)) is not None]
        return min(times, default=None)

    def next_change(self) -> float | None:
        """When the view will next change by itself: an ask falls due or a hold runs out."""
        holds = [
            k.lost_at + self.hold for k in self.nodes.values() if k.route is None and k.lost_at
        ]
        due = self.next_due()
        return min([*holds, *([] if due is None else [due])], default=None)

    def changed(self, node: int, now: float) -> None:
        """Something the node's info says has likely changed (this node resized the cable
        between them: the far end follows): ask it again RELINKED from now."""
        known = self.nodes.get(node)
        if known is not None and known.fetched_at is not None:
            known.relinked_at = now

    def asking(self, node: int, now: float) -> None:
        if node in self.nodes:
            self.nodes[node].asked_at, self.nodes[node].in_flight = now, True

    def pushers(self) -> dict[int, float]:
        """Routed nodes that push (their info has a version), each with since when it is
        routed: whom this node's own info is pushed to."""
        return {
            k.node_id: k.routed_at
            for k in self.nodes.values()
            if k.route is not None and _pushes(k.info)
        }

    def answered(self, node: int, info: dict[str, Any], now: float) -> bool:
        """An answer to our ask; whether it was taken (an older version is not)."""
        known = self.nodes.get(node)
        if known is None:
            return False
        known.in_flight = False
        return self._take(known, info, now)

    def pushed(self, node: int, info: dict[str, Any], now: float) -> bool:
        """Info the node pushed; whether it was taken: only from a routed node (one not
        routed yet is asked when its route appears), and never older than what is held."""
        known = self.nodes.get(node)
        if known is not None and known.route is None:
            known.missed = True  # what it said is asked for when its route is back
        if known is None or known.route is None or not _pushes(info):
            return False
        return self._take(known, info, now)

    def _take(self, known: Known, info: dict[str, Any], now: float) -> bool:
        if _older(info, known.info):
            known.error = None
            return False
        known.info, known.fetched_at, known.error, known.missed = info, now, None, False
        self._doubt(now)
        return True

    def _doubt(self, now: float) -> None:
        """Mark the routed nodes whose answers disagree about a neighbour (see DOUBTED)."""
        answered = {format_node_id(k.node_id): k for k in self.nodes.values() if k.info and k.route}
        listed = {
            ident: {n.get("node_id") for n in _neighbours(k.info)} for ident, k in answered.items()
        }
        doubtful = set()
        for ident, theirs in listed.items():
            for other in {o for o in theirs if isinstance(o, str)} & answered.keys():
                if ident not in listed[other]:
                    doubtful |= {ident, other}
        for ident, known in answered.items():
            if ident not in doubtful:
                known.doubted_at, known.doubts = None, 0
            elif known.doubted_at is None or known.doubted_at < (known.fetched_at or 0.0):
                known.doubted_at, known.doubts = now, known.doubts + 1

    def failed(self, node: int, error: str) -> None:
        if node in self.nodes:
            self.nodes[node].error, self.nodes[node].in_flight = error, False

    def view(self, now: float) -> list[dict[str, Any]]:
        """`status.nodes`: every other node known, reachable ones first, by name."""
        out = []
        for known in self.nodes.values():
            info = known.info or {}
            route = known.route or {}
            reachable = self._held(known, now)
            lost = None if known.lost_at is None else round(now - known.lost_at, 1)
            out.append(
                {
                    "node_id": format_node_id(known.node_id),
                    "name": info.get("name"),
                    "node_address": str(node_address(known.node_id)),
                    "node_address_v4": info.get("node_address_v4"),
                    "reachable": reachable,
                    "route_lost_s": lost if reachable else None,  # in the hold: how long
                    "last_seen_s": None if reachable else lost,
                    "metric": route.get("metric"),
                    "interface": route.get("interface"),
                    "via": route.get("via"),
                    "version": info.get("version"),
                    "info": info.get("info", {}),
                    "neighbours": [
                        {"node_id": n.get("node_id"), "interface": n.get("interface")}
                        for n in _neighbours(known.info)
                    ],
                    "cables": _cables(known.info),
                    "rdma": info.get("rdma"),  # checked (nodes/checked.py); None: Linux
                    "links": [
                        {k: i.get(k) for k in LINK_KEYS}
                        for i in info.get("interfaces") or []
                        if isinstance(i, dict)
                    ],
                    "info_age_s": (
                        None if known.fetched_at is None else round(now - known.fetched_at, 1)
                    ),
                    "error": known.error,
                }
            )
        out.sort(key=lambda n: (not n["reachable"], n["name"] or "~", n["node_id"]))
        return out


def events(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`watch` node events between two `view`s (nodediff.py says when a node is up, down or
    changed)."""
    return [
        {"type": "node", "action": action, "node": dict(view)}
        for action, view in node_changes(before, after)
    ]
