"""The other nodes as a `watch` stream tells them, kept across reconnects (pure).

babblerd sends node events only while a client is connected; after a reconnect the client
gets a new snapshot. `NodeTracker` turns every snapshot into the events since the one
before (nodediff.py, the daemon's own rules), so a program following nodes sees each node
come and go once, whatever happened to the connection in between.
"""

from __future__ import annotations

from typing import cast

from babbler.client.model import Event, Node, NodeAction, NodeEvent, Snapshot, parse_node
from babbler.core.nodediff import node_changes


class NodeTracker:
    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}  # node id -> as last told, unreachable ones too

    def feed(self, event: Event) -> list[NodeEvent]:
        """The node events `event` means for a program that has seen every earlier one."""
        if isinstance(event, NodeEvent):
            self.nodes[event.node.node_id] = event.node
            return [event]
        if not isinstance(event, Snapshot):
            return []
        before = [n.raw for n in self.nodes.values()]
        self.nodes = {n.node_id: n for n in event.status.nodes}
        return [
            NodeEvent(cast(NodeAction, action), parse_node(view))
            for action, view in node_changes(before, [n.raw for n in event.status.nodes])
        ]
