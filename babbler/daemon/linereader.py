"""Reading newline-terminated lines from a trio stream (a client of the public socket, babeld's
control socket), a chunk at a time, with the cap of `core.lines.LineSplitter`."""

from __future__ import annotations

import collections

import trio

from babbler.core.lines import CHUNK, LineSplitter


class LineReader:
    """Whole lines from a stream; `TOO_LONG` for one over the cap."""

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
