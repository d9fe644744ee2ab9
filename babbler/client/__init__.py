"""babbler.client: read a babblerd from a program (docs/client.md).

Blocking::

    from babbler.client import Client
    client = Client()                      # $BABBLER_SOCKET or /run/babbler/babblerd.sock
    for node in client.nodes():
        print(node.label, node.node_address, node.hops)
    for event in client.watch_nodes():     # reconnects with back-off, for ever
        print(event.action, event.node.label)

Async, under asyncio or trio::

    from babbler.client import AsyncClient
    async for event in AsyncClient().watch_nodes():
        print(event.action, event.node.label)

Results are typed (`Status`, `Node`, events) and keep their JSON in `raw`; errors are
`ClientError`s (`NotRunning`, `AccessDenied`, `Disconnected`, `Refused`, `TooSlow`,
`ProtocolError`). `Connection` is the raw line protocol (docs/protocol.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from babbler.client.backoff import Backoff
from babbler.client.connection import Connection, path_problem
from babbler.client.errors import (
    AccessDenied,
    ClientError,
    Disconnected,
    NotRunning,
    ProtocolError,
    Refused,
    TooSlow,
)
from babbler.client.model import (
    Address,
    Babeld,
    CableAddress,
    Change,
    Counters,
    Event,
    Interface,
    LinkCounters,
    Lost,
    Neighbour,
    Node,
    NodeCounters,
    NodeEvent,
    NodeNeighbour,
    Route,
    Snapshot,
    Status,
    parse_counters,
    parse_event,
    parse_status,
)
from babbler.client.sync import Client, ask, default_socket, nodes, status, watch
from babbler.client.tracker import NodeTracker

if TYPE_CHECKING:
    from babbler.client.aio import AsyncClient, AsyncConnection

__all__ = [
    "AccessDenied",
    "Address",
    "AsyncClient",
    "AsyncConnection",
    "Babeld",
    "Backoff",
    "CableAddress",
    "Change",
    "Client",
    "ClientError",
    "Connection",
    "Counters",
    "Disconnected",
    "Event",
    "Interface",
    "LinkCounters",
    "Lost",
    "Neighbour",
    "Node",
    "NodeCounters",
    "NodeEvent",
    "NodeNeighbour",
    "NodeTracker",
    "NotRunning",
    "ProtocolError",
    "Refused",
    "Route",
    "Snapshot",
    "Status",
    "TooSlow",
    "ask",
    "default_socket",
    "nodes",
    "parse_counters",
    "parse_event",
    "parse_status",
    "path_problem",
    "status",
    "watch",
]


def __getattr__(name: str) -> Any:
    """The async client is imported on first use: anyio stays out of blocking programs
    (and out of babblerctl's start-up)."""
    if name in ("AsyncClient", "AsyncConnection"):
        from babbler.client import aio

        return getattr(aio, name)
    raise AttributeError(f"module 'babbler.client' has no attribute {name!r}")
