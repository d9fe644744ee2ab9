"""`babblerctl watch` for people (pure): one line per change that means something to them
(a node up or down or reached another way, a link up or down, a neighbour met or lost,
the mesh or babeld starting and failing), and the JSON form programs read.

Fed the client library's events in order; keeps what it needs to say "n3" instead of a
node id and "down" only when a link was up. Every line is escaped (core/printable.py): names
and link names come from other machines.
"""

from __future__ import annotations

import json
from ipaddress import ip_address
from typing import Any

from babbler.client.model import Change, Event, Lost, NodeEvent, Snapshot, Status
from babbler.core.printable import escape


def as_json(event: Event) -> str | None:
    """The event as babblerd sent it (None for Lost, which babblerd never sends)."""
    if isinstance(event, Snapshot):
        return _compact({"type": "snapshot", "status": event.status.raw})
    if isinstance(event, NodeEvent):
        return _compact({"type": "node", "action": event.action, "node": event.node.raw})
    if isinstance(event, Change):
        action = {} if event.action is None else {"action": event.action}
        return _compact({"type": event.type, **action, event.type: event.value})
    return None


def _compact(value: dict[str, Any]) -> str:
    return json.dumps(value, separators=(",", ":"))  # as babblerd writes it


class WatchView:
    def __init__(self, only_nodes: bool = False) -> None:
        self.only_nodes = only_nodes
        self.names: dict[str, str] = {}  # node id -> name
        self.links: dict[str, bool] = {}  # interface -> up
        self.neighbours: dict[tuple[str | None, str | None], str] = {}  # -> who
        self.ways: dict[str, str | None] = {}  # node id -> the link its route leaves by
        self.ids: dict[str, str] = {}  # node address -> node id
        self.far_ends: dict[tuple[str | None, str | None], str] = {}  # neighbour -> node id
        self.restarts: int | None = None
        self.lost = False

    def lines(self, event: Event) -> list[str]:
        """What a person reads of one event: a line each, none when it means nothing."""
        return [escape(line) for line in self._lines(event)]

    def _lines(self, event: Event) -> list[str]:
        if isinstance(event, Lost):
            self.lost = True
            return [f"{_gone(event.reason)}; waiting for it to come back"]
        if isinstance(event, Snapshot):
            return self._snapshot(event.status)
        if isinstance(event, NodeEvent):
            return self._node(event)
        if self.only_nodes:
            return []
        return self._change(event)

    def _snapshot(self, s: Status) -> list[str]:
        self.names = {n.node_id: n.label for n in s.nodes} | {s.node_id: s.name or s.node_id}
        self.links = {i.name: i.up for i in s.interfaces}
        self.neighbours = {(n.address, n.interface): self._who(n.node_id) for n in s.neighbours}
        self.ways = {n.node_id: n.interface for n in s.nodes if n.reachable}
        self.ids = {_host(n.node_address): n.node_id for n in s.nodes}
        self.restarts = s.babeld.restarts
        reached = sum(1 for n in s.nodes if n.reachable)
        back = "babblerd is back: " if self.lost else ""
        self.lost = False
        return [
            f"{back}{s.name or s.node_id}: mesh {s.mesh}, {len(s.neighbours)} neighbours, "
            f"{reached} of {len(s.nodes)} other nodes reachable"
        ]

    def _who(self, node_id: str | None) -> str:
        return "?" if node_id is None else self.names.get(node_id, node_id)

    def _node(self, event: NodeEvent) -> list[str]:
        node = event.node
        name = node.label
        self.names[node.node_id] = name
        self.ids[_host(node.node_address)] = node.node_id
        if event.action == "down":
            self.ways.pop(node.node_id, None)
            return [f"{name} down"]
        way = f" via {node.interface}" if node.interface else ""
        hops = f", {node.hops} hops" if node.hops else ""
        if event.action == "up":
            self.ways[node.node_id] = node.interface
            return [f"{name} up{way}{hops}"]
        before = self.ways.get(node.node_id)
        if node.interface and before != node.interface:  # rerouted onto another link
            self.ways[node.node_id] = node.interface
            return [f"{name} now via {node.interface} (metric {node.metric}){hops}"]
        return []

    def _neighbour(self, action: str | None, value: dict[str, Any]) -> list[str]:
        """A neighbour met or lost, said the same way both times: who (once a route from it
        says), on which link, its link-local address. A change says only who one met
        unnamed turned out to be (babeld names a neighbour after its first route)."""
        key = (value.get("address"), value.get("interface"))
        before = self.neighbours.get(key, "?")
        who = self._who(value.get("node_id") or self.far_ends.get(key))
        if who == "?":
            who = before
        if action == "flush":
            self.neighbours.pop(key, None)
            self.far_ends.pop(key, None)  # whoever comes there next is told by its routes
        else:
            self.neighbours[key] = who
        where = f"on {key[1]} ({key[0]})"
        if action == "change":
            return [f"neighbour {where} is {who}"] if before == "?" != who else []
        name = "" if who == "?" else f" {who}"
        return [f"neighbour{name} {'lost' if action == 'flush' else 'met'} {where}"]

    def _far_end(self, route: dict[str, Any]) -> list[str]:
        """Who a neighbour is, as babblerd tells it in status (core/farend.py): the node
        whose own address it announces with refmetric 0 (watch's neighbour events do not
        say). Said once for a neighbour met unnamed."""
        node = self.ids.get(_host(route.get("prefix")))
        if node is None or route.get("refmetric") != 0:
            return []
        key = (route.get("via"), route.get("interface"))
        self.far_ends[key] = node
        if self.neighbours.get(key) != "?":
            return []
        return self._neighbour("change", {"address": key[0], "interface": key[1]})

    def _change(self, event: Change) -> list[str]:
        value: Any = event.value
        if event.type == "interfaces":
            out = []
            now = {i["name"]: bool(i.get("up")) for i in value}
            for name, up in now.items():
                if name not in self.links:
                    out.append(f"link {name} appeared ({'up' if up else 'down'})")
                elif self.links[name] != up:
                    out.append(f"link {name} {'up' if up else 'down'}")
            out += [f"link {name} gone" for name in self.links if name not in now]
            self.links = now
            return out
        if event.type == "neighbour" and event.action in ("add", "change", "flush"):
            return self._neighbour(event.action, value)
        if event.type == "route" and event.action in ("add", "change"):
            return self._far_end(value)
        if event.type == "mesh":
            return [f"mesh {value}"]
        if event.type == "babeld" and isinstance(value, dict):
            restarts = value.get("restarts")
            if self.restarts is not None and restarts and restarts > self.restarts:
                self.restarts = restarts
                return [f"babeld failed ({restarts} restarts): {value.get('last_error')}"]
            self.restarts = restarts
        if event.type == "node_id":
            return [f"this node's id is now {value} (a collision: another node had it)"]
        return []


def _gone(reason: str) -> str:
    """Why the connection to babblerd went, as the start of one line: the client's reason
    names babblerd already; a hint after `;` (how to start it) is for a failing command."""
    reason = reason.split(";")[0].strip()
    return reason if reason.startswith("babblerd") else f"lost babblerd: {reason}"


def _host(text: object) -> str:
    """An address or its /128, in one spelling (babeld's and Python's may differ); "" for
    anything else."""
    address, _, length = str(text).partition("/")
    try:
        return str(ip_address(address)) if length in ("", "128") else ""
    except ValueError:
        return ""
