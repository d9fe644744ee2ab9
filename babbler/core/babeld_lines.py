"""babeld's control-socket lines, parsed. Pure.

Every line babeld writes is one of:
- a greeting line: `BABEL 1.0`, `version V`, `host H`, `my-id ID`;
- a status line ending a request: `ok`, `no[ message]`, `bad[ message]`;
- a table line: `add|change|flush KIND HANDLE key value key value ...`, KIND being
  interface, neighbour, route or xroute; HANDLE is babeld's object handle (the interface name
  for interfaces).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

VERBS = ("add", "change", "flush")
KINDS = ("interface", "neighbour", "xroute", "route")  # babeld's own dump order
STATUSES = ("ok", "no", "bad")
GREETING_KEYS = ("BABEL", "version", "host", "my-id")


class MalformedLine(ValueError):
    """A line that is none of the shapes babeld writes."""


@dataclass(frozen=True)
class TableLine:
    verb: str
    kind: str
    handle: str
    fields: tuple[tuple[str, str], ...]

    @property
    def key(self) -> tuple[str, str]:
        return (self.kind, self.handle)

    @property
    def body(self) -> str:
        """Everything after the handle, in babeld's order and spelling."""
        return " ".join(f"{k} {v}" for k, v in self.fields)

    def field(self, name: str) -> str | None:
        for key, value in self.fields:
            if key == name:
                return value
        return None

    def render(self, verb: str | None = None) -> str:
        body = self.body
        return f"{verb or self.verb} {self.kind} {self.handle}" + (f" {body}" if body else "")


@dataclass(frozen=True)
class StatusLine:
    status: str  # ok | no | bad
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass(frozen=True)
class GreetingLine:
    key: str
    value: str


Line = TableLine | StatusLine | GreetingLine


def parse_line(text: str) -> Line:
    """Parse one line (without its newline). Raises MalformedLine."""
    words = text.split()
    if not words:
        raise MalformedLine("empty line")
    head = words[0]
    if head in STATUSES:
        return StatusLine(head, text[len(head) :].strip())
    if head in GREETING_KEYS:
        return GreetingLine(head, " ".join(words[1:]))
    if head in VERBS:
        if len(words) < 3 or words[1] not in KINDS:
            raise MalformedLine(f"malformed table line: {text[:80]!r}")
        rest = words[3:]
        if len(rest) % 2:
            raise MalformedLine(f"odd number of fields: {text[:80]!r}")
        fields = tuple(zip(rest[0::2], rest[1::2], strict=True))
        return TableLine(head, words[1], words[2], fields)
    raise MalformedLine(f"unknown line: {text[:80]!r}")


class RepeatFilter:
    """babeld repeats identical `change` lines on every update (measured: 5,736 of 5,870
    `monitor` lines in 10 s on a node of a 16-node ring, BABELD.md). `is_repeat` says, from
    the raw bytes alone and before any decoding or parsing, whether a table line is identical
    to the last one for the same entry (kind, handle), so nothing downstream pays for it.
    A repeat costs one partition and one set lookup: the set holds every entry's last line
    (after the verb), and a line equal to one of them is that entry's repeat."""

    def __init__(self) -> None:
        self._last: dict[bytes, bytes] = {}  # b"kind handle" -> its last line after the verb
        self._current: set[bytes] = set()  # the values of _last
        self._census: set[bytes] | None = None  # entries a whole table named so far

    def is_repeat(self, raw: bytes) -> bool:
        verb, _, rest = raw.partition(b" ")
        if verb == b"change" or verb == b"add":
            if self._census is not None:
                self._census.add(entry_key(rest))
            if rest in self._current:
                return True
            key = entry_key(rest)
            old = self._last.get(key)
            if old is not None:
                self._current.discard(old)
            self._last[key] = rest
            self._current.add(rest)
        elif verb == b"flush":
            old = self._last.pop(entry_key(rest), None)
            if old is not None:
                self._current.discard(old)
        return False

    def begin_census(self) -> None:
        """babeld's whole table follows (`dump`, or `monitor`'s snapshot): note every entry
        it names, its repeats too (they are dropped all the same: nothing changed)."""
        self._census = set()

    def end_census(self, complete: bool = True) -> list[bytes]:
        """The whole table came: an entry it did not name is gone from babeld. Forget each
        and return a `flush` line for it (with its last fields), for the table to drop.
        Not `complete` (the answer never came whole): nothing is concluded."""
        named, self._census = self._census, None
        if named is None or not complete:
            return []
        gone = [key for key in self._last if key not in named]
        flushes = []
        for key in gone:
            rest = self._last.pop(key)
            self._current.discard(rest)
            flushes.append(b"flush " + rest)
        return flushes


def entry_key(rest: bytes) -> bytes:
    """b"kind handle" of a table line after its verb: which entry the line is about."""
    kind, _, tail = rest.partition(b" ")
    return kind + b" " + tail.partition(b" ")[0]


# What babeld prints at every start on links that are not wireless, and on a kernel that
# refuses a route it retries: never why it stopped.
CHATTER = (
    re.compile(r"^ioctl\(SIOCGIWNAME\)"),
    re.compile(r"^Warning: couldn't determine whether .* is a wireless interface"),
)


def telling(lines: Iterable[str]) -> str:
    """babeld's last output lines that may say why it stopped (its start-up chatter left
    out), joined for one line of status."""
    return " | ".join(line for line in lines if not any(c.match(line) for c in CHATTER))
