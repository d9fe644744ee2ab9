"""The client protocol's requests: parsing and the help table. Pure.

Requests are single words on a line (DESIGN.md "Client protocol"). Anything else is answered
with `bad <reason>` and the connection stays usable.
"""

from __future__ import annotations

MAX_REQUEST = 4096

# request -> one-line description; `help` prints this table in this order.
REQUESTS = {
    "dump": "the babeld table as babeld lines (add interface|neighbour|route|xroute), then ok",
    "monitor": "the same as dump, then live add|change|flush lines until unmonitor",
    "unmonitor": "stop the live lines of monitor",
    "status": "one JSON object with the node's state, then ok",
    "watch": "one JSON snapshot line, then one JSON event per line, live",
    "stats": "one JSON object on the daemon process (tasks, open fds, memory), then ok",
    "help": "this list, then ok",
    "quit": "close the connection",
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
    return [f"{name}: {text}" for name, text in REQUESTS.items()]
