"""babeld's routes in the kernel as a trigger (Linux): the kernel's route events, read only
for their headers (nlfilter.babel_route), tell the mesh when to read babeld's table again
(mesh.py: a dump a second while routes move, seldom while none does).
"""

from __future__ import annotations

import errno
import socket

import trio
from pyroute2.netlink.rtnl import RTMGRP_IPV4_ROUTE, RTMGRP_IPV6_ROUTE

from babbler.daemon.links.nlfilter import babel_route, kept

# Only a trigger: a small queue that overflows in a churn (ENOBUFS, itself a trigger) costs
# less than reading every message of it.
BUFFER = 1 << 16
DRAIN = 1000  # messages read in one go at most (a 64 KB queue holds a few hundred)
RECV = 1 << 20


class RouteEvents:
    """A netlink socket subscribed to both families' route events, read without waiting."""

    def __init__(self) -> None:
        self._sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, BUFFER)
        self._sock.bind((0, RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_ROUTE))
        self._sock.setblocking(False)

    async def wait(self) -> None:
        """Until a route message of babeld's has come since the last return. All that queued
        meanwhile is read at once: read one a wake, a start's backlog kept a mesh stirred for
        a minute."""
        while not self._babel_routes_queued():
            await trio.lowlevel.wait_readable(self._sock)

    def _babel_routes_queued(self) -> bool:
        """Read every queued route message; whether one was babeld's. A full queue (ENOBUFS)
        may have held one: that counts."""
        seen = False
        for _ in range(DRAIN):
            try:
                data = self._sock.recv(RECV)
            except BlockingIOError:
                return seen
            except OSError as error:
                if error.errno != errno.ENOBUFS:
                    raise
                seen = True
                continue
            seen = seen or bool(kept(data, babel_route))
        return True  # still coming: a churn

    def close(self) -> None:
        self._sock.close()
