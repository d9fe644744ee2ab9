"""Links read from sysfs and /proc on Linux, without netlink. Lean (standard library only).

The netlink backend (linux.py) takes the facts netlink does not give from here (device,
wireless, driver, speed). The early start (early.py) reads whole links from here, so that
babeld can be spawned before pyroute2 and trio are imported; the daemon then checks that
choice against its netlink snapshot.
"""

from __future__ import annotations

import os
from contextlib import suppress
from pathlib import Path

from babbler.core.links import Link

SYSFS_NET = Path("/sys/class/net")
IF_INET6 = Path("/proc/net/if_inet6")
IFF_UP = 0x1
IFA_F_TENTATIVE = 0x40
IFA_F_DADFAILED = 0x08


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
    """Names of links holding a link-local address that is neither tentative nor failed,
    from /proc/net/if_inet6 (address, index, prefix length, scope, flags, name)."""
    names = set()
    for line in text.splitlines():
        fields = line.split()
        if len(fields) != 6 or int(fields[0][:4], 16) & 0xFFC0 != 0xFE80:  # fe80::/10
            continue
        if not int(fields[4], 16) & (IFA_F_TENTATIVE | IFA_F_DADFAILED):
            names.add(fields[5])
    return names


def read_links() -> dict[str, Link]:
    """The links of this network namespace (no addresses but the link-local fact)."""
    try:
        link_local = usable_link_locals(IF_INET6.read_text())
    except OSError:
        link_local = set()
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
            link_local=name in link_local,
            speed_mbps=speed,
        )
    return links
