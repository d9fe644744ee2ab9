"""What clients are shown: the `status` object and the `watch` events, built from facts.

Pure. The daemon gathers `Facts` (plain values); `status` shapes them as DESIGN.md's status
JSON; `node_view` is the node-level part that `watch` follows, and `node_events` turns two
of those into events for what changed; `entry_event` is the event for one table entry.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from babbler.core import mtu
from babbler.core.addressing import format_node_id, node_address, node_range
from babbler.core.cost import Overrides, link_cost
from babbler.core.farend import far_ends
from babbler.core.graph import Graph
from babbler.core.links import Links, Selector, selected_links
from babbler.core.table import INFINITY, VIEWS, Applied, MeshTable


@dataclass(frozen=True)
class Facts:
    """Everything `status` is made of, as the daemon knows it now."""

    version: str
    node_id: int
    node_id_source: str
    node_id_persist_error: str | None
    mode: str
    mesh: str  # the supervisor's state
    babeld: dict[str, Any]
    links: Links
    selector: Selector
    told: frozenset[str]  # interfaces babeld uses
    table: MeshTable
    clients: int  # connections other than the one asking
    costs: Overrides = ()
    keyed: bool = False  # a mesh key is configured (never the key itself)
    name: str = ""  # this node's name (node info)
    nodes: tuple[dict[str, Any], ...] = ()  # the other nodes (nodes.NodeBook.view)
    # IPv4 (daemon/ipv4_service.py view): ipv4_prefix, node_address_v4, ipv4_problem,
    # addresses_v4; empty while the daemon has not said.
    ipv4: dict[str, Any] = field(default_factory=dict)
    brought_up: frozenset[str] = frozenset()  # links babblerd brought up (and holds up)
    mtu: int | None = None  # --mtu (None: auto): what `max_mtu` offers (core/mtu.py)
    kernel_problem: str | None = None  # the kernel failed the last pass (core/kernelhealth.py)
    platform: str = "linux"  # what babblerd acts as (core/platform.py Platform.key)
    rdma: dict[str, Any] | None = None  # macOS: RDMA readiness (core/rdma.py); None: Linux
    # Each link's counters as last read (daemon/counters.py: None where not readable), and
    # this node's monotonic clock then; None: not read. In `status` only: never an event.
    counters: Mapping[str, dict[str, int] | None] = field(default_factory=dict)
    counters_at: float | None = None


def addresses(facts: Facts) -> list[dict[str, str]]:
    """The link addresses of our range (the node address on loopback is `node_address`)."""
    own = node_range(facts.node_id)
    return [
        {"interface": link.name, "address": str(address)}
        for link in sorted(facts.links.values(), key=lambda ln: ln.name)
        if not link.is_loopback
        for address in sorted(link.addresses)
        if address in own
    ]


def interfaces(facts: Facts) -> list[dict[str, Any]]:
    return [
        {
            "name": link.name,
            "kind": link.category,
            "up": link.up,
            "babel": link.name in facts.told,
            "speed_mbps": link.speed_mbps,
            "cost": link_cost(link, facts.costs),
            "brought_up": link.name in facts.brought_up,
            "mtu": link.mtu,
            "max_mtu": mtu.offer(link, facts.mtu),
        }
        for link in selected_links(facts.links, facts.selector)
    ]


def with_counters(facts: Facts, listed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`interfaces` as `status` shows them: each with its counters (null where not read).
    Kept out of `interfaces` itself, which `watch` compares: a counter moves all the time."""
    return [{**item, "counters": facts.counters.get(item["name"])} for item in listed]


def unmatched_globs(links: Links, selector: Selector) -> list[str]:
    """`--interface` patterns that match no link at all: most likely a typo."""
    return [
        pattern
        for pattern in selector.interface
        if not any(fnmatch.fnmatchcase(name, pattern) for name in links)
    ]


def neighbour_nodes(table: MeshTable) -> dict[tuple[str | None, str | None], str]:
    """(neighbour address, interface) -> the node there, by babeld's word alone
    (core/farend.py: its routes to that node's own range come through it with refmetric 0).
    Kept until the table changes (`MeshTable.memo`): shared, not to be changed."""
    return table.memo("neighbour_nodes", _neighbour_nodes)


def _neighbour_nodes(table: MeshTable) -> dict[tuple[str | None, str | None], str]:
    return {(a, end.link): end.node for end in far_ends(table) for a in end.addresses}


def with_hops(status: dict[str, Any]) -> list[dict[str, Any]]:
    """`status.nodes` with each node's hops from this one on the path `babblerctl path`
    shows (None: cut off, or no path in the graph the node infos give leaves by the link
    babeld's route leaves by: the infos are behind the routes)."""
    routes = {n["node_id"]: n.get("interface") for n in status["nodes"] if n["reachable"]}
    hops = Graph.from_status(status).hops(routes)
    return [{**node, "hops": hops.get(node["node_id"])} for node in status["nodes"]]


def entries(table: MeshTable, kind: str) -> list[dict[str, Any]]:
    return [VIEWS[kind](entry) for entry in table.entries(kind)]


def status(facts: Facts) -> dict[str, Any]:
    """The `status` object (DESIGN.md "Client protocol"): keys are only ever added."""
    nodes = neighbour_nodes(facts.table)
    value = {
        "version": facts.version,
        "node_id": format_node_id(facts.node_id),
        "range": str(node_range(facts.node_id)),
        "mode": facts.mode,
        "mesh": facts.mesh,
        "babeld": facts.babeld,
        "addresses": addresses(facts),
        "interfaces": with_counters(facts, interfaces(facts)),
        "counters_at": facts.counters_at,
        "node_address": str(node_address(facts.node_id)),
        "neighbours": [
            {**view, "node_id": nodes.get((view["address"], view["interface"]))}
            for view in entries(facts.table, "neighbour")
        ],
        # A retracted route lingers with metric 65535 for a while: not a live route.
        "routes": [r for r in entries(facts.table, "route") if not retracted(r)],
        "xroutes": entries(facts.table, "xroute"),
        "clients": facts.clients,
        "node_id_source": facts.node_id_source,
        "node_id_persist_error": facts.node_id_persist_error,
        "keyed": facts.keyed,
        "unmatched_globs": unmatched_globs(facts.links, facts.selector),
        "name": facts.name,
        "nodes": list(facts.nodes),
        "ipv4_prefix": facts.ipv4.get("ipv4_prefix"),
        "node_address_v4": facts.ipv4.get("node_address_v4"),
        "ipv4_problem": facts.ipv4.get("ipv4_problem"),
        "addresses_v4": facts.ipv4.get("addresses_v4", []),
        "kernel_problem": facts.kernel_problem,
        "platform": facts.platform,
        "rdma": facts.rdma,
    }
    value["nodes"] = with_hops(value)
    return value


def retracted(route: dict[str, Any]) -> bool:
    return route["metric"] is None or route["metric"] >= INFINITY


def node_view(facts: Facts) -> dict[str, Any]:
    """The node-level facts `watch` reports as `{"type": KEY, KEY: value}` when they change."""
    return {
        "mesh": facts.mesh,
        "node_id": format_node_id(facts.node_id),
        "addresses": addresses(facts),
        "interfaces": interfaces(facts),
        "babeld": facts.babeld,
    }


def node_events(before: dict[str, Any], after: dict[str, Any]) -> list[dict[str, Any]]:
    """One event per node-level key whose value changed (or is new)."""
    return [
        {"type": key, key: value}
        for key, value in after.items()
        if key not in before or before[key] != value
    ]


def entry_event(applied: Applied) -> dict[str, Any] | None:
    """The `watch` event for a table entry that really changed; None for a repeat."""
    if not applied.real:
        return None
    kind = applied.entry.kind
    return {"type": kind, "action": applied.verb, kind: VIEWS[kind](applied.entry)}


# A neighbour's RTT is sent to `watch` again only once it moved this far from the last one
# sent: RTT_MOVE_MS, or RTT_MOVE_SHARE of it, whichever is more (docs/protocol.md
# "watch"). babeld re-measures it on every hello: on an idle 4-ring (veth) 164 of 199
# `monitor` lines in 25 s were such moves, p99 0.38 ms, max 0.41 ms.
RTT_MOVE_MS = 1.0
RTT_MOVE_SHARE = 0.25


class WatchFilter:
    """What of the table `watch` sends (`monitor` gets babeld's every line): no RTT moves
    too small to matter, and routes as `status` shows them: a route that is retracted
    (metric infinite) leaves as a `flush`, comes back as an `add`, and is not followed in
    between."""

    def __init__(self) -> None:
        self._sent: dict[tuple[str, str], dict[str, Any]] | None = None  # as last sent

    def start(self, table: MeshTable) -> None:
        """A first `watch` client came: its snapshot shows the table as it stands now."""
        self._sent = {}
        for kind, view in VIEWS.items():
            for entry in table.entries(kind):
                shown = view(entry)
                if not (kind == "route" and retracted(shown)):
                    self._sent[entry.key] = shown

    @property
    def started(self) -> bool:
        return self._sent is not None

    def stop(self) -> None:
        """The last `watch` client went: nothing to follow until the next one."""
        self._sent = None

    def event(self, applied: Applied) -> dict[str, Any] | None:
        event = entry_event(applied) if self._sent is not None else None
        if event is None or self._sent is None:
            return None
        kind, verb, view = event["type"], event["action"], event[event["type"]]
        key = applied.entry.key
        before = self._sent.get(key)
        if kind == "route" and verb != "flush" and retracted(view):
            verb = "flush"  # as in status: a retracted route is no route
        if verb == "flush":
            if self._sent.pop(key, None) is None and kind == "route":
                return None  # already gone as far as watch knows
        elif before is None:
            verb = "add"  # new to watch (a route back from retracted)
        elif kind == "neighbour" and _only_rtt_moved(before, view):
            return None
        if verb != "flush":
            self._sent[key] = view
        return {"type": kind, "action": verb, kind: view}


def _only_rtt_moved(before: dict[str, Any], after: dict[str, Any]) -> bool:
    """Nothing but the RTT changed, and by less than RTT_MOVE_MS / RTT_MOVE_SHARE."""
    if {k: v for k, v in before.items() if k != "rtt"} != {
        k: v for k, v in after.items() if k != "rtt"
    }:
        return False
    old, new = before.get("rtt"), after.get("rtt")
    if old is None or new is None:
        return bool(old == new)
    return bool(abs(new - old) < max(RTT_MOVE_MS, RTT_MOVE_SHARE * old))
