"""Links read from sysfs on Linux, without pyroute2. Lean (standard library only).

The netlink backend (daemon/links/linux.py) takes the facts netlink does not give from here
(device, wireless, driver, speed). The early start (daemon/early.py) and `babblerctl doctor`
read whole links from here: the early start so that babeld can be spawned before pyroute2
and trio are imported (the daemon then checks that choice against its netlink snapshot).
Which links have a usable link-local address comes from one raw netlink dump (/proc/net is
hidden under systemd's `ProcSubset=pid`), else from /proc/net/if_inet6.
"""

from __future__ import annotations

import os
import socket
import struct
from contextlib import suppress
from pathlib import Path

from babbler.core.links import Link

SYSFS_NET = Path("/sys/class/net")
IF_INET6 = Path("/proc/net/if_inet6")
IFF_UP = 0x1
IFA_F_TENTATIVE = 0x40
IFA_F_DADFAILED = 0x08
IFA_F_OPTIMISTIC = 0x04


def settled(flags: int) -> bool:
    """Whether an IPv6 address with these IFA_F_* flags can be sent from: not failed, and
    either done with duplicate address detection or optimistic (RFC 4429; someone set
    optimistic_dad on the link)."""
    if flags & IFA_F_DADFAILED:
        return False
    return not flags & IFA_F_TENTATIVE or bool(flags & IFA_F_OPTIMISTIC)


def device_facts(name: str) -> tuple[bool, bool, str | None, int | None]:
    """(has a device, is wireless, driver name, speed in Mb/s) from sysfs; false and None
    when sysfs is elsewhere."""
    base = SYSFS_NET / name
    has_device = (base / "device").exists()
    wireless = (base / "wireless").exists() or (base / "phy80211").exists()
    driver = None
    with suppress(OSError):
        driver = os.path.basename(os.readlink(base / "device" / "driver"))
    return has_device, wireless, driver, read_speed(base / "speed")


def read_speed(path: Path) -> int | None:
    """A sysfs `speed` file: Mb/s, or None for -1, unknown or unreadable (EINVAL while the
    link is down)."""
    try:
        value = int(path.read_text().strip())
    except (OSError, ValueError):
        return None
    return value if value > 0 else None


# A link's counters, as /sys/class/net/IF/statistics names its files (and status says them).
STATISTICS = ("rx_bytes", "tx_bytes", "rx_packets", "tx_packets")


def read_counters(name: str) -> dict[str, int] | None:
    """A link's byte and packet counters since it was made (the kernel's 64-bit ones), or
    None when sysfs does not have them (the link went, sysfs is elsewhere)."""
    base = SYSFS_NET / name / "statistics"
    counters = {}
    for key in STATISTICS:
        value = _read_int(base / key)
        if value is None or value < 0:
            return None
        counters[key] = value
    return counters


def _read_int(path: Path, base: int = 10) -> int | None:
    try:
        return int(path.read_text().strip(), base)
    except (OSError, ValueError):
        return None


def _kind(base: Path) -> str | None:
    """DEVTYPE from uevent (bridge, vlan, bond...), as near as sysfs gets to netlink's kind."""
    with suppress(OSError):
        for line in (base / "uevent").read_text().splitlines():
            if line.startswith("DEVTYPE="):
                return line.partition("=")[2] or None
    return None


def usable_link_locals(text: str) -> set[str]:
    """Names of links holding a settled link-local address (`settled`), from
    /proc/net/if_inet6 (address, index, prefix length, scope, flags, name)."""
    names = set()
    for line in text.splitlines():
        fields = line.split()
        if len(fields) != 6 or int(fields[0][:4], 16) & 0xFFC0 != 0xFE80:  # fe80::/10
            continue
        if settled(int(fields[4], 16)):
            names.add(fields[5])
    return names


NLMSG_HEADER = struct.Struct("=IHHII")  # length, type, flags, sequence, port
IFADDRMSG = struct.Struct("=BBBBI")  # family, prefix length, flags, scope, index
RTATTR = struct.Struct("=HH")  # length, type
RTM_NEWADDR, RTM_GETADDR, NLMSG_ERROR, NLMSG_DONE = 20, 22, 2, 3
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
IFA_ADDRESS, IFA_FLAGS = 1, 8


def link_local_indexes(data: bytes) -> tuple[set[int], bool]:
    """From RTM_NEWADDR messages (an IPv6 address dump): the indexes of links with a
    settled link-local address (`settled`), and whether the dump ended here."""
    indexes: set[int] = set()
    offset = 0
    while offset + NLMSG_HEADER.size <= len(data):
        length, kind, *_ = NLMSG_HEADER.unpack_from(data, offset)
        if length < NLMSG_HEADER.size:
            return indexes, True  # malformed: stop
        if kind in (NLMSG_DONE, NLMSG_ERROR):
            return indexes, True
        body = offset + NLMSG_HEADER.size
        if kind == RTM_NEWADDR and length >= NLMSG_HEADER.size + IFADDRMSG.size:
            _, _, flags, _, index = IFADDRMSG.unpack_from(data, body)
            address, at, end = b"", body + IFADDRMSG.size, offset + length
            while at + RTATTR.size <= end:
                size, kind_ = RTATTR.unpack_from(data, at)
                if size < RTATTR.size:
                    break
                value = data[at + RTATTR.size : at + size]
                if kind_ == IFA_ADDRESS:
                    address = value
                elif kind_ == IFA_FLAGS and len(value) == 4:
                    flags = struct.unpack("=I", value)[0]
                at += (size + 3) & ~3
            link_local = len(address) == 16 and address[0] == 0xFE and address[1] & 0xC0 == 0x80
            if link_local and settled(flags):
                indexes.add(index)
        offset += (length + 3) & ~3
    return indexes, False


def netlink_link_locals() -> set[int] | None:
    """One IPv6 address dump over a raw netlink socket; None if netlink cannot be read."""
    try:
        with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE) as sock:
            sock.settimeout(2.0)
            request = IFADDRMSG.pack(socket.AF_INET6, 0, 0, 0, 0)
            header = NLMSG_HEADER.pack(
                NLMSG_HEADER.size + len(request), RTM_GETADDR, NLM_F_REQUEST | NLM_F_DUMP, 1, 0
            )
            sock.send(header + request)
            found: set[int] = set()
            while True:
                indexes, done = link_local_indexes(sock.recv(1 << 16))
                found |= indexes
                if done:
                    return found
    except OSError:
        return None


def read_links() -> dict[str, Link]:
    """The links of this network namespace (no addresses but the link-local fact)."""
    by_index = netlink_link_locals()
    link_local: set[str] = set()
    if by_index is None:
        with suppress(OSError):
            link_local = usable_link_locals(IF_INET6.read_text())
    links = {}
    for name in os.listdir(SYSFS_NET):
        base = SYSFS_NET / name
        index = _read_int(base / "ifindex")
        if index is None:
            continue
        has_device, wireless, driver, speed = device_facts(name)
        links[name] = Link(
            name=name,
            index=index,
            arp_type=_read_int(base / "type") or 0,
            kind=_kind(base),
            has_device=has_device,
            wireless=wireless,
            driver=driver,
            master=_read_int(base / "master" / "ifindex"),
            up=bool((_read_int(base / "flags", 16) or 0) & IFF_UP),
            link_local=index in by_index if by_index is not None else name in link_local,
            speed_mbps=speed,
        )
    return links
