"""netifaces as babblerd reads it on a Mac, for a macOS lab node (on its babblerd's PYTHONPATH).

On Linux the real netifaces gives IPv6 addresses without flags; on a Mac each carries its
IN6_IFF_* flags, which babblerd reads to tell a tentative link-local and its own deprecated
(`pltime 0`) cable addresses (core/darwin_output.py address_facts). Without them a macOS node
would re-add its cable addresses at every pass. So IPv6 comes from /proc/net/if_inet6 (the
namespace's, with Linux's IFA_F_* flags mapped to macOS's IN6_IFF_*); everything else is the
real netifaces.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from ipaddress import IPv6Address
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))


def _real() -> Any:
    path = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("netifaces", path)
    if spec is None or spec.loader is None:
        raise ImportError("the real netifaces is not installed (netifaces-plus)")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_netifaces = _real()
AF_INET = _netifaces.AF_INET
AF_INET6 = _netifaces.AF_INET6
AF_LINK = getattr(_netifaces, "AF_LINK", 17)
interfaces = _netifaces.interfaces
# Linux's IFA_F_* (as /proc/net/if_inet6 gives them) -> macOS's IN6_IFF_* (netinet6/in6_var.h)
FLAGS = ((0x40, 0x02), (0x08, 0x04), (0x20, 0x10))  # tentative, duplicated, deprecated
IF_INET6 = "/proc/net/if_inet6"


def _inet6(name: str) -> list[dict[str, Any]]:
    out = []
    with open(IF_INET6) as table:
        for line in table:
            fields = line.split()
            if len(fields) != 6 or fields[5] != name:
                continue
            address = IPv6Address(bytes.fromhex(fields[0]))
            prefixlen, linux = int(fields[2], 16), int(fields[4], 16)
            flags = sum(mac for bit, mac in FLAGS if linux & bit)
            shown = f"{address}%{name}" if address.is_link_local else str(address)
            netmask = f"{IPv6Address((1 << 128) - (1 << (128 - prefixlen)))}/{prefixlen}"
            out.append({"addr": shown, "netmask": netmask, "flags": flags})
    return out


def ifaddresses(name: str) -> dict[int, list[dict[str, Any]]]:
    found: dict[int, list[dict[str, Any]]] = dict(_netifaces.ifaddresses(name))
    entries = _inet6(name)
    if entries:
        found[AF_INET6] = entries
    else:
        found.pop(AF_INET6, None)
    return found
