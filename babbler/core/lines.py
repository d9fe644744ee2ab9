"""Splitting bytes into newline-terminated lines, with a cap on line length (pure).

A line longer than the cap is not kept: its bytes are dropped up to the next newline and
`TOO_LONG` stands once in its place, so memory stays bounded whatever a peer sends. The
thread that reads babeld (daemon/babeld/reader.py) feeds it chunks directly; the daemon's
stream reader (daemon/linereader.py) wraps it for trio streams.
"""

from __future__ import annotations

from typing import Final

TOO_LONG: Final = b"\0too-long"
CHUNK = 65536


class LineSplitter:
    """Bytes in, complete lines out."""

    def __init__(self, max_line: int) -> None:
        self._max = max_line
        self._partial = b""  # the start of a line whose newline has not come yet
        self._discarding = False  # dropping an over-long line's bytes up to its newline

    def feed(self, data: bytes | bytearray) -> list[bytes]:
        """The lines `data` completes (each without its newline and trailing CR; TOO_LONG
        for one over the cap), perhaps none."""
        # bytes(b) of a bytes object is that object: no copy in the usual case.
        data = self._partial + data if self._partial else bytes(data)
        lines = data.split(b"\n")
        self._partial = lines.pop()
        if lines and self._discarding:  # the first line's start was dropped
            self._discarding = False
            lines[0] = TOO_LONG
        if len(self._partial) > self._max:
            self._discarding = True
            self._partial = b""
        if lines and (b"\r" in data or max(map(len, lines)) > self._max):
            lines = [self._clean(line) for line in lines]
        return lines

    def _clean(self, line: bytes) -> bytes:
        if line is TOO_LONG or len(line) > self._max:
            return TOO_LONG
        return line.removesuffix(b"\r")
