"""The client protocol's requests: one table of name -> (help text, handler), and parsing.

Requests are single words on a line (DESIGN.md "Client protocol"). Every request but
`watch` (a stream) and `quit` (the end) is answered by data lines and exactly one status
line. Anything that is not a request gets `bad <reason>`; the connection stays usable.
Handlers only queue text for the client (fanout.Client.offer): they never block.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from babbler.daemon.fanout import Client, Hub, encode_json
from babbler.daemon.selfstats import process_stats

MAX_REQUEST = 4096


class View(Protocol):
    """What requests read from the daemon. Reads publish nothing; a request that reads the
    table calls `settle` first, which applies what babeld said that still waits and
    publishes it to the subscribers already there."""

    def header(self) -> list[str]: ...
    def settle(self) -> None: ...
    def dump_lines(self) -> list[str]: ...
    def counters(self) -> dict[str, int]:
        """babeld's lines in (and repeats dropped), over the daemon's life."""
        ...

    def status(self, asker: object = None) -> dict[str, Any]:
        """`clients` counts the connections other than `asker`."""
        ...

    async def read_counters(self) -> None:
        """Read the link counters the next `status` or `counters` shows."""
        ...

    def counters_answer(self) -> dict[str, Any]:
        """The `counters` request's object; the asker is a viewer from now on."""
        ...


Handler = Callable[[Client, Hub, View], None]


@dataclass(frozen=True)
class Request:
    help: str
    handler: Handler
    # How the answer ends: "status" (one ok/no/bad line), "stream" (never), "close".
    ends: str = "status"
    # The link counters are read (awaited, bounded: daemon/counters.py) before the handler.
    reads_counters: bool = False


def _lines(lines: list[str], status: str = "ok") -> str:
    return "".join(f"{line}\n" for line in lines) + f"{status}\n"


def _dump(client: Client, hub: Hub, view: View) -> None:
    view.settle()
    client.offer(_lines(view.dump_lines()))


def _monitor(client: Client, hub: Hub, view: View) -> None:
    if client.monitor:
        client.offer("ok\n")
        return
    # Snapshot and subscription happen with no await between: nothing is missed, and
    # nothing published before the snapshot is sent again after it.
    view.settle()
    hub.flush()
    client.offer(_lines(view.dump_lines()))
    client.monitor = True
    hub.subscription_changed()


def _unmonitor(client: Client, hub: Hub, view: View) -> None:
    was, client.monitor = client.monitor, False
    client.offer("ok\n")
    if was:
        hub.subscription_changed()


def _status(client: Client, hub: Hub, view: View) -> None:
    view.settle()
    client.offer(encode_json(view.status(client)) + "\nok\n")


def _watch(client: Client, hub: Hub, view: View) -> None:
    if client.watch:
        client.offer("bad already watching\n")
        return
    view.settle()
    hub.flush()
    client.offer(encode_json({"type": "snapshot", "status": view.status(client)}) + "\n")
    client.watch = True
    hub.subscription_changed()


def _stats(client: Client, hub: Hub, view: View) -> None:
    stats = {**process_stats(len(hub.clients)), **view.counters(), "items_out": hub.items_out}
    client.offer(encode_json(stats) + "\nok\n")


def _counters(client: Client, hub: Hub, view: View) -> None:
    client.offer(encode_json(view.counters_answer()) + "\nok\n")


def _help(client: Client, hub: Hub, view: View) -> None:
    client.offer(_lines(help_lines()))


def _quit(client: Client, hub: Hub, view: View) -> None:
    pass  # the server ends the connection after sending what is queued


# `help` prints this table in this order.
REQUESTS: dict[str, Request] = {
    "dump": Request(
        "the babeld table as babeld lines (add interface|neighbour|route|xroute), then ok", _dump
    ),
    "monitor": Request(
        "the same as dump, then live add|change|flush lines until unmonitor", _monitor
    ),
    "unmonitor": Request("stop the live lines of monitor", _unmonitor),
    "status": Request(
        "one JSON object with the node's state, then ok", _status, reads_counters=True
    ),
    "watch": Request(
        "one JSON snapshot line, then one JSON event per line, live",
        _watch,
        ends="stream",
        reads_counters=True,
    ),
    "counters": Request(
        "one JSON object with each link's bytes and packets of this node and, while"
        " someone asks each second, of the other nodes; then ok",
        _counters,
        reads_counters=True,
    ),
    "stats": Request(
        "one JSON object on the daemon process (tasks, open fds, memory, lines in and out),"
        " then ok",
        _stats,
    ),
    "help": Request("this list, then ok", _help),
    "quit": Request("close the connection", _quit, ends="close"),
}


class BadRequest(ValueError):
    """The reason goes to the client after `bad `."""


def _printable(text: str, limit: int = 40) -> str:
    shown = text[:limit].encode("unicode_escape").decode("ascii")
    return shown + ("..." if len(text) > limit else "")


def parse_request(raw: bytes) -> str | None:
    """The request name, or None for a blank line. Raises BadRequest."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BadRequest("request is not UTF-8") from None
    words = text.split()
    if not words:
        return None
    name = words[0]
    if name not in REQUESTS:
        raise BadRequest(f"unknown request {_printable(name)!r}, try help")
    if len(words) > 1:
        raise BadRequest(f"{name} takes no arguments")
    return name


def help_lines() -> list[str]:
    return [f"{name}: {request.help}" for name, request in REQUESTS.items()]
