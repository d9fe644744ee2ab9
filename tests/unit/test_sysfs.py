"""Links from /proc/net/if_inet6: only settled link-local addresses make a link usable."""

from __future__ import annotations

from babbler.daemon.links.sysfs import usable_link_locals

IF_INET6 = """\
00000000000000000000000000000001 01 80 10 80       lo
fd000000000000000000000000000002 04 40 00 82     eth0
fe8000000000000000fc00fffe000001 04 40 20 80     eth0
fe80000000000000a8bbccfffedd0001 05 40 20 c0     v1x2
fe80000000000000a8bbccfffedd0002 06 40 20 88     v1x3
febf000000000000a8bbccfffedd0003 07 40 20 80     v1x4
fec0000000000000a8bbccfffedd0004 08 40 20 80     v1x5
"""


def test_tentative_and_failed_link_locals_do_not_count() -> None:
    # v1x2 tentative (0x40), v1x3 DAD failed (0x08); v1x4 is fe80::/10 too; fec0 is not.
    assert usable_link_locals(IF_INET6) == {"eth0", "v1x4"}
    assert usable_link_locals("garbage\n\n") == set()
