"""Change events as triggers: wait for one, gather the rest of its burst, never trust them.

Both backends read a socket of kernel messages (netlink on Linux, PF_ROUTE on macOS) only to
learn that something changed; the daemon then re-reads everything. So a lost message
(ENOBUFS: the kernel's queue overflowed) is no harm either: it is counted and logged.
"""

from __future__ import annotations

import errno

import structlog
import trio

log = structlog.get_logger("babbler.links")

# Events arrive in bursts (a link going down drops several addresses); gather them briefly
# so that one re-read covers the burst. Well under the 50 ms reaction goal.
DEBOUNCE = 0.005
RECV_SIZE = 1 << 16


class EventSocket:
    """A kernel message socket read as a trigger."""

    def __init__(self, sock: trio.socket.SocketType) -> None:
        self.sock = sock
        self.overflows = 0  # times the kernel dropped messages (ENOBUFS)

    async def burst(self) -> None:
        """Return after one message and whatever followed it within DEBOUNCE."""
        await self._receive()
        with trio.move_on_after(DEBOUNCE):
            while True:
                await self._receive()

    async def _receive(self) -> None:
        try:
            await self.sock.recv(RECV_SIZE)
        except OSError as error:
            if error.errno != errno.ENOBUFS:
                raise
            self.overflows += 1
            log.info("link events overflowed; re-reading every link", overflows=self.overflows)

    def close(self) -> None:
        self.sock.close()
