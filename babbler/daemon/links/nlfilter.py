"""Netlink messages dropped before they are parsed, and told apart by their header (pure).

pyroute2 parses a route in tens of microseconds. The IPv4 clash check reads every route of
the host every few seconds, and in a mesh nearly all of them are babeld's (one per other
node), which it leaves out anyway: at 16 nodes that read was an eighth of a quiet babblerd's
CPU (docs/benchmarks.md "The first minute"). `kept` walks the buffer by the messages'
headers and keeps only those `keep` wants, so those are never parsed.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from pyroute2.netlink.rtnl import RTM_DELROUTE, RTM_NEWROUTE

from babbler.core.fence import PROTOCOL as RTPROT_BABEL

HEADER = struct.Struct("=IHHII")  # nlmsghdr: length, type, flags, sequence, port
ALIGN = 4
Keep = Callable[[int, bytes], bool]  # (message type, body after the header) -> parse it
RTMSG_SIZE = 12  # family, dst_len, src_len, tos, table, protocol, scope, type; flags
RTN_LOCAL, RTN_BROADCAST = 2, 3


def kept(data: bytes, keep: Keep) -> bytes:
    """`data` (netlink messages back to back) with only the messages `keep(type, body)`
    wants. A header that does not add up (too short, past the end) ends the walk: the rest is
    kept as it is, for the parser to refuse."""
    out = bytearray()
    at = 0
    while at + HEADER.size <= len(data):
        length, kind, _, _, _ = HEADER.unpack_from(data, at)
        if length < HEADER.size or at + length > len(data):
            break
        end = min(len(data), at + ((length + ALIGN - 1) & ~(ALIGN - 1)))  # with its padding
        if keep(kind, data[at + HEADER.size : at + length]):
            out += data[at:end]
        at = end
    out += data[at:]
    return bytes(out)


def host_route(kind: int, body: bytes) -> bool:
    """A message of a route dump the clash check reads: not one of babeld's routes, nor a
    local or broadcast entry (rtmsg: its protocol is byte 5, its type byte 7)."""
    if kind != RTM_NEWROUTE or len(body) < RTMSG_SIZE:
        return True  # DONE, an error, or one too short: for the parser to take or refuse
    return body[5] != RTPROT_BABEL and body[7] not in (RTN_LOCAL, RTN_BROADCAST)


def babel_route(kind: int, body: bytes) -> bool:
    """A route event of babeld's (a route of protocol babel came, went or changed)."""
    routes = (RTM_NEWROUTE, RTM_DELROUTE)
    return kind in routes and len(body) >= RTMSG_SIZE and body[5] == RTPROT_BABEL
