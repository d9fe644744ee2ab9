"""Reading newline-terminated lines from a trio stream, with a cap on line length.

A line longer than the cap is not kept: its bytes are dropped up to the next newline and the
reader yields `TOO_LONG` once in its place, so memory stays bounded whatever a peer sends.
Lines are split a received chunk at a time (`LineSplitter`, pure), which the thread that
reads babeld (babeld/reader.py) uses directly.
"""

from __future__ import annotations

import collections
from typing import Final

import trio

TOO_LONG: Final = b"\0too-long"
CHUNK = 65536


class LineSplitter:
    """Bytes in, complete lines out (pure; the line logic of LineReader, also used by the
    thread that reads babeld, babeld/reader.py)."""

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


class LineReader:
    def __init__(self, stream: trio.abc.ReceiveStream, max_line: int) -> None:
        self._stream = stream
        self.splitter = LineSplitter(max_line)
        self.ready: collections.deque[bytes] = collections.deque()  # complete, not yet taken
        self._eof = False

    async def readline(self) -> bytes | None:
        """The next line without its newline (and without a trailing CR), `TOO_LONG`, or None
        at end of stream (a partial last line is dropped)."""
        if not self.ready and not await self._fill():
            return None
        return self.ready.popleft()

    async def _fill(self) -> bool:
        """Receive until at least one line is complete; False at end of stream."""
        while not self._eof:
            data = await self._stream.receive_some(CHUNK)
            if not data:
                self._eof = True
                break
            lines = self.splitter.feed(data)
            if lines:
                self.ready.extend(lines)
                return True
        return False
