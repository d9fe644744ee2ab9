"""Links from /proc/net/if_inet6 or one netlink dump: only settled link-local addresses make
a link usable."""

from __future__ import annotations

import socket
import struct

from hypothesis import given
from hypothesis import strategies as st
from pyroute2.netlink.rtnl.ifaddrmsg import ifaddrmsg

from babbler.host import sysfs
from babbler.host.sysfs import usable_link_locals

IF_INET6 = """\
00000000000000000000000000000001 01 80 10 80       lo
fd000000000000000000000000000002 04 40 00 82     eth0
fe8000000000000000fc00fffe000001 04 40 20 80     eth0
fe80000000000000a8bbccfffedd0001 05 40 20 c0     v1x2
fe80000000000000a8bbccfffedd0002 06 40 20 88     v1x3
febf000000000000a8bbccfffedd0003 07 40 20 80     v1x4
fe80000000000000a8bbccfffedd0006 09 40 20 c4     v1x6
fec0000000000000a8bbccfffedd0004 08 40 20 80     v1x5
"""


def test_tentative_and_failed_link_locals_do_not_count() -> None:
    # v1x2 tentative (0x40), v1x3 DAD failed (0x08); v1x4 is fe80::/10 too; fec0 is not;
    # v1x6 tentative but optimistic (0x04): usable (RFC 4429).
    assert usable_link_locals(IF_INET6) == {"eth0", "v1x4", "v1x6"}
    assert usable_link_locals("garbage\n\n") == set()


def newaddr(index: int, address: str, flags: int = 0, in_attr: bool = False) -> bytes:
    """An RTM_NEWADDR message as the kernel sends it (pyroute2 encodes it)."""
    msg = ifaddrmsg()
    msg["header"]["type"] = sysfs.RTM_NEWADDR
    msg["family"], msg["prefixlen"], msg["index"] = socket.AF_INET6, 64, index
    msg["flags"] = 0 if in_attr else flags & 0xFF
    msg["attrs"] = [("IFA_ADDRESS", address), *([("IFA_FLAGS", flags)] if in_attr else [])]
    msg.encode()
    return bytes(msg.data)


def test_link_locals_from_a_netlink_dump_without_proc_net() -> None:
    """The early start's link check under ProcSubset=pid: one raw netlink dump."""
    done = struct.pack("=IHHII", 20, sysfs.NLMSG_DONE, 0, 1, 0) + b"\0" * 4
    dump = b"".join(
        [
            newaddr(2, "fe80::1"),
            newaddr(3, "fe80::2", sysfs.IFA_F_TENTATIVE),
            newaddr(4, "fe80::3", sysfs.IFA_F_DADFAILED, in_attr=True),
            newaddr(5, "fde0:20c6:1fa7::1"),  # not link-local
            newaddr(6, "febf::1"),  # fe80::/10 still
        ]
    )
    assert sysfs.link_local_indexes(dump) == ({2, 6}, False)  # more to come
    assert sysfs.link_local_indexes(dump + done) == ({2, 6}, True)


@given(st.binary(max_size=200))
def test_a_netlink_dump_of_nonsense_raises_nothing(data: bytes) -> None:
    sysfs.link_local_indexes(data)
