"""The mesh as a graph of machines, from `status` alone (so babblerctl can draw and walk it
without asking anything else). Pure.

Edges: this node's neighbours (`status.neighbours[].node_id`, babeld's link cost), and each
reachable node's neighbours as its node info lists them, with the cost of its link (a node
cut off keeps its last info, which no longer says anything about the mesh). `path` follows
the lowest total cost, as babeld's metric does, leaving by the link babeld's route leaves by;
`hops` counts that path's steps.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from babbler.core.cost import UNKNOWN_COST  # a link whose cost the info did not say
from babbler.core.printable import escape


@dataclass(frozen=True)
class Edge:
    to: str  # node id
    interface: str | None  # the link's name on the sending node
    cost: int
    speed_mbps: int | None = None


@dataclass
class Graph:
    me: str
    names: dict[str, str] = field(default_factory=dict)  # node id -> name
    edges: dict[str, list[Edge]] = field(default_factory=dict)
    unreachable: set[str] = field(default_factory=set)  # node ids status says are cut off

    @classmethod
    def from_status(cls, status: Mapping[str, Any]) -> Graph:
        graph = cls(status["node_id"])
        graph.names[graph.me] = status.get("name") or graph.me
        speeds = {i["name"]: i.get("speed_mbps") for i in status.get("interfaces") or []}
        for n in status.get("neighbours") or []:
            if n.get("node_id"):
                interface = n.get("interface")
                edge = Edge(n["node_id"], interface, n.get("cost") or 0, speeds.get(interface))
                graph.add(graph.me, edge)
        for node in status.get("nodes") or []:
            graph.names[node["node_id"]] = node.get("name") or node["node_id"]
            if node.get("reachable") is False:  # cut off: what its info says is old
                graph.unreachable.add(node["node_id"])
                continue
            links = {i["name"]: i for i in node.get("links") or []}
            for n in node.get("neighbours") or []:
                if n.get("node_id"):
                    link = links.get(n.get("interface")) or {}
                    cost = link.get("cost") or UNKNOWN_COST
                    edge = Edge(n["node_id"], n.get("interface"), cost, link.get("speed_mbps"))
                    graph.add(node["node_id"], edge)
        return graph

    def add(self, node: str, edge: Edge) -> None:
        if edge.to != node and all(
            e.to != edge.to or e.interface != edge.interface for e in self.edges.get(node, [])
        ):
            self.edges.setdefault(node, []).append(edge)
            # a node only another's info names (not listed, nor answered): named by its id
            self.names.setdefault(edge.to, edge.to)

    def neighbours(self, node: str) -> list[Edge]:
        """The node's edges; a node whose info has not come yet borrows the reverse ones."""
        if node in self.edges:
            return self.edges[node]
        return [
            Edge(other, None, e.cost)
            for other, edges in self.edges.items()
            for e in edges
            if e.to == node
        ]

    def hops(self, routes: Mapping[str, str | None]) -> dict[str, int]:
        """Node id -> hops on the path `path` shows, for each node in `routes` (node id ->
        the link babeld's route to it leaves by; None while rerouting). A node no path in
        the graph reaches by that link is left out: the infos are behind the routes, and a
        count through a cable just pulled would contradict LINK and NEXT HOP."""
        trees: dict[str | None, dict[str, tuple[str, Edge]]] = {}
        out = {}
        for target, first in routes.items():
            if first not in trees:
                trees[first] = self.tree(first)
            if target == self.me:
                out[target] = 0
            elif target in trees[first]:
                out[target] = len(_walk(trees[first], self.me, target))
        return out

    def path(self, target: str, first: str | None = None) -> list[tuple[str, Edge]] | None:
        """The lowest-cost path to `target` as (from node, edge) steps, or None. With `first`
        (the link babeld's route leaves by) the path leaves by it: babeld's route is what
        traffic takes, while another node's info can still list a cable just pulled. When no
        path leaves by `first` (the infos are behind the routes), the cheapest of any."""
        for tree in ([self.tree(first)] if first is not None else []) + [self.tree(None)]:
            if target in tree or target == self.me:
                return _walk(tree, self.me, target)
        return None

    def tree(self, first: str | None) -> dict[str, tuple[str, Edge]]:
        """The cheapest paths from this node to every node it reaches, leaving by the link
        `first` (any when None), as node id -> the step that reaches it (Dijkstra)."""
        best: dict[str, int] = {self.me: 0}
        came: dict[str, tuple[str, Edge]] = {}
        queue: list[tuple[int, str]] = [(0, self.me)]
        while queue:
            cost, node = heapq.heappop(queue)
            if cost > best[node]:
                continue
            for edge in self.neighbours(node):
                if node == self.me and first is not None and edge.interface != first:
                    continue
                total = cost + edge.cost
                if total < best.get(edge.to, total + 1):
                    best[edge.to] = total
                    came[edge.to] = (node, edge)
                    heapq.heappush(queue, (total, edge.to))
        return came


def _walk(tree: dict[str, tuple[str, Edge]], me: str, target: str) -> list[tuple[str, Edge]]:
    steps = []
    while target != me:
        steps.append(tree[target])
        target = tree[target][0]
    return steps[::-1]


def _speed(mbps: int | None) -> str:
    if mbps is None:
        return ""
    return f" {mbps / 1000:g}G" if mbps >= 1000 else f" {mbps}M"


def _quote(*lines: str) -> str:
    """A DOT string of these lines (DOT's \\n between them): control characters shown as
    escapes (core/printable.py: names come from other machines, and DOT is printed on a
    terminal), then backslashes and quotes escaped."""
    escaped = [escape(line).replace("\\", "\\\\").replace('"', '\\"') for line in lines]
    return '"' + "\\n".join(escaped) + '"'


# How a node cut off from this one is drawn, and any link of it another's info still lists.
UNREACHABLE_NODE = 'style="rounded,dashed", color=grey55, fontcolor=grey45'
UNREACHABLE_LINK = ", style=dashed, color=grey55, fontcolor=grey45"


def to_dot(graph: Graph) -> str:
    """Graphviz DOT: machines as boxes (this one bold, an unreachable one dashed and grey,
    saying so), each link once, labelled with the link names at both ends and the speed."""
    lines = [
        "graph mesh {",
        '  node [shape=box, style=rounded, fontname="sans-serif"];',
        '  edge [fontname="sans-serif", fontsize=10];',
    ]
    for node in sorted(graph.names):
        said = [graph.names[node], node]
        mark = ', style="rounded,bold", penwidth=2' if node == graph.me else ""
        if node in graph.unreachable:
            said.append("unreachable")
            mark = f", {UNREACHABLE_NODE}"
        lines.append(f"  {_quote(node)} [label={_quote(*said)}{mark}];")
    done: set[tuple[str, str | None]] = set()
    for node in sorted(graph.edges):
        for edge in graph.edges[node]:
            if (node, edge.interface) in done:
                continue
            back = next(
                (e for e in graph.edges.get(edge.to, []) if e.to == node
                 and (edge.to, e.interface) not in done),
                None,
            )  # fmt: skip
            done.add((node, edge.interface))
            ends = edge.interface or "?"
            if back is not None:
                done.add((edge.to, back.interface))
                ends += f" - {back.interface or '?'}"
            label = ends + _speed(edge.speed_mbps or (back.speed_mbps if back else None))
            cut = UNREACHABLE_LINK if graph.unreachable & {node, edge.to} else ""
            lines.append(f"  {_quote(node)} -- {_quote(edge.to)} [label={_quote(label)}{cut}];")
    lines.append("}")
    return "\n".join(lines) + "\n"
