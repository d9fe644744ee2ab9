"""Who is at the far end of a new cable, asked before babeld is (where babeld has no
v4-via-v6: macOS).

There babeld's IPv4 next hop on a link is the link's IPv4 address, which it reads by the
link's name, and when that address changes it flushes every route it learned over the link,
IPv6 too (interface.c `check_interface_ipv4`): Linux's cause of a 64 s reroute outlier,
which labels hide there. A cable's /31 is worked out from both ends' link-locals
(daemon/ipv4.py), which babblerd otherwise learns from babeld's neighbours: after babeld has
learned routes over the link. So on such a platform a new link is told to babeld only once
its /31 is on it: this module finds the far end's link-local first, with one ICMPv6 echo
request to ff02::1 on the link (every IPv6 host answers; no babbler needed at the far end).
Its own looped-back request names this end's link-local.

`far_link_locals` is every kernel backend's `Kernel.far_link_locals` (links/kernel.py): the
probe is a socket, the same on every platform, and is asked only where babeld needs it.
"""

from __future__ import annotations

import errno
import os
import struct
from ipaddress import IPv6Address

import trio

from babbler.core.errors import KernelError
from babbler.core.links import Link

ALL_NODES = "ff02::1"
ECHO_REQUEST, ECHO_REPLY = 128, 129
# One try: answers from a cable's far end come in well under a millisecond; 0.2 s leaves
# room for a loaded machine. Tries go on every PROBE_EVERY until PROBE_FOR (the far end's
# link-local may still be in DAD, ~1 s), then the link is told to babeld all the same.
ANSWERS_WITHIN = 0.2
PROBE_EVERY = 0.3
PROBE_FOR = 3.0


def parse(packet: bytes, identifier: int) -> int | None:
    """The ICMPv6 type of an echo request or reply of ours (by its identifier), else None."""
    if len(packet) < 8:
        return None
    kind, _, _, ident, _ = struct.unpack("!BBHHH", packet[:8])
    if kind in (ECHO_REQUEST, ECHO_REPLY) and ident == identifier:
        return int(kind)
    return None


async def link_locals(
    index: int, wait: float = ANSWERS_WITHIN
) -> tuple[IPv6Address | None, set[IPv6Address]]:
    """(this end's link-local, the others') on the link `index`, from one echo request to
    ff02::1 there. Raises OSError (no raw socket: not root)."""
    import socket

    identifier = int.from_bytes(os.urandom(2), "big")
    sock = trio.socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
    own: IPv6Address | None = None
    others: set[IPv6Address] = set()
    with sock:
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_IF, index)
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_LOOP, 1)
        request = struct.pack("!BBHHH", ECHO_REQUEST, 0, 0, identifier, 1) + b"babbler"
        await sock.sendto(request, (ALL_NODES, 0, 0, index))  # the kernel sums it
        with trio.move_on_after(wait):
            while True:
                packet, source = await sock.recvfrom(2048)
                if source[3] != index:
                    continue
                kind = parse(packet, identifier)
                address = IPv6Address(source[0].split("%")[0])
                if kind == ECHO_REQUEST:
                    own = address
                elif kind == ECHO_REPLY:
                    others.add(address)
    if own is not None:
        others.discard(own)
    return own, others


async def far_link_locals(link: Link) -> tuple[IPv6Address | None, set[IPv6Address]]:
    """`link_locals` on `link`, as a kernel backend answers it. Raises KernelError."""
    try:
        return await link_locals(link.index)
    except OSError as error:
        raise KernelError(f"cannot ask {link.name}'s far end: {error}", errno.EIO) from None
