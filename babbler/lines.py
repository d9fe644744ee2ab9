"""Reading newline-terminated lines from a trio stream, with a cap on line length.

A line longer than the cap is not kept: its bytes are dropped up to the next newline and the
reader yields `TOO_LONG` once in its place, so memory stays bounded whatever a peer sends.
"""

from __future__ import annotations

from typing import Final

import trio

TOO_LONG: Final = b"\0too-long"
CHUNK = 65536


class LineReader:
    def __init__(self, stream: trio.abc.ReceiveStream, max_line: int) -> None:
        self._stream = stream
        self._max = max_line
        self._buffer = bytearray()
        self._discarding = False
        self._eof = False

    async def readline(self) -> bytes | None:
        """The next line without its newline (and without a trailing CR), `TOO_LONG`, or None
        at end of stream (a partial last line is dropped)."""
        while True:
            newline = self._buffer.find(b"\n")
            if newline >= 0:
                line = bytes(self._buffer[:newline])
                del self._buffer[: newline + 1]
                if self._discarding:
                    self._discarding = False
                    return TOO_LONG
                if len(line) > self._max:
                    return TOO_LONG
                return line.removesuffix(b"\r")
            if self._discarding or len(self._buffer) > self._max:
                self._discarding = True
                self._buffer.clear()
            if self._eof:
                return None
            data = await self._stream.receive_some(CHUNK)
            if not data:
                self._eof = True
                continue
            self._buffer += data
