"""The blocking client: `Client` and its one-call shortcuts in babbler.client."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from babbler.client.backoff import Reconnecting
from babbler.client.connection import Connection
from babbler.client.errors import Disconnected, NotRunning, ProtocolError, Refused
from babbler.client.model import (
    Counters,
    Event,
    Node,
    NodeEvent,
    Status,
    parse_counters,
    parse_event,
    parse_status,
)
from babbler.client.tracker import NodeTracker
from babbler.core.platform import DEFAULT_RUN_DIR, SOCKET_NAME

# What a reconnecting watch outlives: the daemon gone, restarting, full, or cutting us off.
RETRIED = (NotRunning, Disconnected, Refused)


def default_socket() -> Path:
    """$BABBLER_SOCKET, else the system daemon's socket (/run/babbler/babblerd.sock)."""
    return Path(os.environ.get("BABBLER_SOCKET") or DEFAULT_RUN_DIR / SOCKET_NAME)


def one_json(lines: list[str], request: str) -> Any:
    """The JSON object of a one-line answer (`status`, `stats`)."""
    if len(lines) != 1:
        raise ProtocolError(f"`{request}` answered {len(lines)} lines, not one")
    try:
        return json.loads(lines[0])
    except ValueError:
        raise ProtocolError(f"`{request}` answered something that is not JSON") from None


class Client:
    """A program's way to babblerd's socket. Each call opens its own short connection,
    so a Client is cheap, holds nothing between calls and may be shared by threads.

    `socket`: the socket path (default: `default_socket()`); `timeout`: seconds for a
    connect and for each answer."""

    def __init__(self, socket: str | os.PathLike[str] | None = None, timeout: float = 10.0):
        self.path = Path(socket) if socket is not None else default_socket()
        self.timeout = timeout

    def request(self, request: str) -> list[str]:
        """A request's data lines (before `ok`)."""
        with Connection(self.path, self.timeout) as conn:
            return conn.request(request)

    def status(self) -> Status:
        """This node's state (never starts an on-demand mesh)."""
        return parse_status(one_json(self.request("status"), "status"))

    def nodes(self) -> list[Node]:
        """The other machines: reachable ones first, by name; lost ones stay 10 minutes."""
        return list(self.status().nodes)

    def stats(self) -> dict[str, int]:
        """The daemon process's own counters (`stats` in docs/protocol.md)."""
        value: dict[str, int] = one_json(self.request("stats"), "stats")
        return value

    def counters(self) -> Counters:
        """Each link's bytes and packets, this node's read now and the other nodes' as last
        fetched. Asking makes babblerd fetch the others' each second for the next 3 s: ask
        once a second to follow them (the first answer may hold this node only)."""
        return parse_counters(one_json(self.request("counters"), "counters"))

    def watch(self, reconnect: bool = True) -> Iterator[Event]:
        """Live events: a Snapshot, then one event per change. With `reconnect` (default)
        a lost connection yields Lost once, then tries again with back-off until babblerd
        serves again, which starts with a new Snapshot; without it the error is raised
        (NotRunning, Disconnected, TooSlow). Keeps an on-demand mesh up while it runs."""
        policy = Reconnecting(reconnect)
        while True:
            try:
                with Connection(self.path, self.timeout) as conn:
                    conn.settimeout(None)  # a quiet mesh sends nothing for hours
                    conn.send("watch")
                    for line in conn.lines():
                        yield policy.seen(parse_event(line))
            except RETRIED as error:
                lost, pause = policy.failed(error)
                if lost:
                    yield lost
                time.sleep(pause)

    def watch_nodes(self, reconnect: bool = True) -> Iterator[NodeEvent]:
        """Nodes as they come (`up`), go (`down`) and change: first the known ones, then
        each change, once, also across reconnects (NodeTracker)."""
        tracker = NodeTracker()
        for event in self.watch(reconnect):
            yield from tracker.feed(event)


def status(socket: str | os.PathLike[str] | None = None) -> Status:
    """This node's state: `Client(socket).status()`."""
    return Client(socket).status()


def nodes(socket: str | os.PathLike[str] | None = None) -> list[Node]:
    """The other machines: `Client(socket).nodes()`."""
    return Client(socket).nodes()


def watch(socket: str | os.PathLike[str] | None = None, reconnect: bool = True) -> Iterator[Event]:
    """Live events: `Client(socket).watch(reconnect)`."""
    return Client(socket).watch(reconnect)


def ask(socket: str | os.PathLike[str], request: str, timeout: float = 10.0) -> Any:
    """The decoded JSON of a one-line answer (`status`, `stats`), untyped: for tools that
    pass the JSON on (babblerctl --json, the lab)."""
    return one_json(Client(socket, timeout).request(request), request)
