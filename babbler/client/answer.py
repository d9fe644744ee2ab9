"""The end of an answer on babblerd's socket, in one place for the blocking and the async
client (pure). An answer is data lines ended by `ok`, or a line `no <reason>` or
`bad <reason>`; the header on connect is an answer too."""

from __future__ import annotations

from babbler.client.errors import ProtocolError, Refused, TooSlow

OK = "ok"
MAX_LINE = 16 << 20  # a status of a large mesh is ~100 KB a line; far beyond that is broken


def ends(line: str) -> bool:
    """True for the line that ends an answer. Raises Refused, TooSlow or ProtocolError for
    `no ...` and `bad ...`."""
    if line == OK:
        return True
    if line.startswith("no ") or line == "no":
        reason = line[3:]
        raise TooSlow(reason) if reason == "too slow" else Refused(reason)
    if line.startswith("bad"):
        raise ProtocolError(f"babblerd said: {line}")
    return False


def streamed(line: str) -> str:
    """A line of a stream (`monitor`, `watch`), passed on; raises as `ends` for the
    `no ...`/`bad ...` line babblerd ends a stream with."""
    if line.startswith(("no", "bad")):
        ends(line)
    return line
