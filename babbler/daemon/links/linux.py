"""Linux backend of `Kernel`: rtnetlink over raw sockets, parsed with pyroute2's marshal.

pyroute2's own IPRoute runs an asyncio loop per thread and keeps its socket thread-local,
which does not mix with trio (BABELD.md); raw AF_NETLINK sockets driven by trio do.
One socket is subscribed to link and address events, both families (subscribe first, then
dump); one carries requests, one at a time.
"""

from __future__ import annotations

import errno
import os
import socket
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from ipaddress import IPv4Address, IPv4Interface, IPv4Network, IPv6Address
from typing import Any

import trio
from pyroute2.netlink import (
    NLM_F_ACK,
    NLM_F_CREATE,
    NLM_F_DUMP,
    NLM_F_EXCL,
    NLM_F_REPLACE,
    NLM_F_REQUEST,
    NLMSG_DONE,
    NLMSG_ERROR,
)
from pyroute2.netlink.rtnl import (
    RTM_DELADDR,
    RTM_DELROUTE,
    RTM_DELRULE,
    RTM_GETADDR,
    RTM_GETLINK,
    RTM_GETROUTE,
    RTM_GETRULE,
    RTM_NEWADDR,
    RTM_NEWLINK,
    RTM_NEWRULE,
    RTMGRP_IPV4_IFADDR,
    RTMGRP_IPV6_IFADDR,
    RTMGRP_LINK,
)
from pyroute2.netlink.rtnl.fibmsg import (
    FR_ACT_BLACKHOLE,
    FR_ACT_TO_TBL,
    FR_ACT_UNREACHABLE,
    fibmsg,
)
from pyroute2.netlink.rtnl.ifaddrmsg import ifaddrmsg
from pyroute2.netlink.rtnl.ifinfmsg import ifinfmsg
from pyroute2.netlink.rtnl.marshal import MarshalRtnl
from pyroute2.netlink.rtnl.rtmsg import rtmsg

from babbler.core.errors import KernelError
from babbler.core.fence import PROTOCOL, Rule, ours
from babbler.core.ipv4 import HostRoute
from babbler.core.links import AddressChange, Link
from babbler.core.platform import NODE_ADDRESS_LABEL, cable_address_label
from babbler.daemon import farprobe
from babbler.daemon.links.events import EventSocket
from babbler.daemon.links.nlfilter import Keep, host_route, kept
from babbler.daemon.links.routeevents import RouteEvents
from babbler.daemon.sysctls import ProcSys, Settings
from babbler.host.sysfs import IFF_UP, device_facts, settled

IFA_F_NODAD = 0x02
IFA_F_DEPRECATED = 0x20
FOREVER = 0xFFFFFFFF  # an address lifetime without end
RTPROT_BABEL = PROTOCOL  # babeld's routes, and the rules babblerd adds for them
FIB_RULE_INVERT = 0x2
ACTIONS = {
    "lookup": FR_ACT_TO_TBL,
    "unreachable": FR_ACT_UNREACHABLE,
    "blackhole": FR_ACT_BLACKHOLE,
}
FAMILIES = {4: socket.AF_INET, 6: socket.AF_INET6}
LOOPBACK = "lo"
RECV_BUFFER = 1 << 20


def _link_from(msg: Any) -> Link:
    info = msg.get_attr("IFLA_LINKINFO")
    name = msg.get_attr("IFLA_IFNAME")
    has_device, wireless, driver, speed = device_facts(name)
    return Link(
        name=name,
        index=msg["index"],
        arp_type=msg["ifi_type"],
        kind=info.get_attr("IFLA_INFO_KIND") if info else None,
        has_device=has_device,
        wireless=wireless,
        driver=driver,
        master=msg.get_attr("IFLA_MASTER") or None,
        up=bool(msg["flags"] & IFF_UP),
        speed_mbps=speed,
        mtu=msg.get_attr("IFLA_MTU"),
        max_mtu=msg.get_attr("IFLA_MAX_MTU") or None,
    )


class LinuxKernel:
    """rtnetlink access for one network namespace (the one the process runs in)."""

    settings: Settings | None = ProcSys()  # /proc/sys: the namespace's own net/ settings

    def __init__(self, events_buffer: int = RECV_BUFFER) -> None:
        # `events_buffer` is the kernel's queue for change events; tests shrink it to make
        # the kernel drop events (ENOBUFS), which a full re-read must make harmless.
        groups = RTMGRP_LINK | RTMGRP_IPV6_IFADDR | RTMGRP_IPV4_IFADDR
        self.events = EventSocket(self._open(groups, events_buffer))
        self._route_events = RouteEvents()
        self._requests = self._open(0, RECV_BUFFER)
        self._lock = trio.Lock()
        self._seq = 0

    @staticmethod
    def _open(groups: int, buffer: int) -> trio.socket.SocketType:
        raw = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, buffer)
        raw.bind((0, groups))
        return trio.socket.from_stdlib_socket(raw)

    def close(self) -> None:
        self.events.close()
        self._route_events.close()
        self._requests.close()

    async def _request(
        self, msg: Any, kind: int, flags: int, keep: Keep | None = None
    ) -> list[Any]:
        """Send one request and collect its answer until DONE or the ACK/error; `keep`:
        which messages of the answer to parse at all (nlfilter.py). Raises KernelError: the
        kernel's error, or the socket's (the answer of a request cut short is skipped by the
        next: its sequence number is not the one asked)."""
        try:
            return await self._exchange(msg, kind, flags, keep)
        except OSError as error:
            raise KernelError(error.strerror or str(error), error.errno or errno.EIO) from None

    async def _exchange(self, msg: Any, kind: int, flags: int, keep: Keep | None) -> list[Any]:
        async with self._lock:
            self._seq += 1
            msg["header"]["type"] = kind
            msg["header"]["flags"] = flags
            msg["header"]["sequence_number"] = self._seq
            msg.encode()
            await self._requests.send(msg.data)
            marshal = MarshalRtnl()
            replies: list[Any] = []
            while True:
                data = await self._requests.recv(RECV_BUFFER)
                for reply in marshal.parse(data if keep is None else kept(data, keep)):
                    if reply["header"]["sequence_number"] != self._seq:
                        continue
                    kind_ = reply["header"]["type"]
                    if kind_ == NLMSG_DONE:
                        return replies
                    if kind_ == NLMSG_ERROR:
                        code = -(reply["error"] or 0)
                        if code:
                            raise KernelError(os.strerror(code), code)
                        return replies
                    replies.append(reply)

    async def read_links(self) -> dict[str, Link]:
        try:
            return await self._read_links()
        except (ValueError, KeyError, TypeError) as error:  # a dump not as netlink says
            raise KernelError(
                f"the kernel's link dump does not parse: {error}", errno.EIO
            ) from None

    async def _read_links(self) -> dict[str, Link]:
        links_msg = ifinfmsg()
        links_msg["family"] = socket.AF_UNSPEC
        links = {
            m["index"]: _link_from(m)
            for m in await self._request(links_msg, RTM_GETLINK, NLM_F_REQUEST | NLM_F_DUMP)
        }
        addr_msg = ifaddrmsg()
        addr_msg["family"] = socket.AF_UNSPEC
        addresses: dict[int, set[IPv6Address]] = {}
        deprecated: dict[int, set[IPv6Address]] = {}
        addresses_v4: dict[int, set[IPv4Interface]] = {}
        link_local: set[int] = set()
        for m in await self._request(addr_msg, RTM_GETADDR, NLM_F_REQUEST | NLM_F_DUMP):
            index = m["index"]
            if m["family"] == socket.AF_INET:
                local = m.get_attr("IFA_LOCAL") or m.get_attr("IFA_ADDRESS")
                addresses_v4.setdefault(index, set()).add(
                    IPv4Interface(f"{local}/{m['prefixlen']}")
                )
                continue
            address = IPv6Address(m.get_attr("IFA_ADDRESS"))
            flags = m.get_attr("IFA_FLAGS") or m["flags"]
            if address.is_link_local:
                if settled(flags):
                    link_local.add(index)
            else:
                addresses.setdefault(index, set()).add(address)
                if flags & IFA_F_DEPRECATED:
                    deprecated.setdefault(index, set()).add(address)
        out = {}
        for index, link in links.items():
            out[link.name] = Link(
                **{
                    **link.__dict__,
                    "link_local": index in link_local,
                    "addresses": frozenset(addresses.get(index, ())),
                    "deprecated": frozenset(deprecated.get(index, ())),
                    "addresses_v4": frozenset(addresses_v4.get(index, ())),
                }
            )
        return out

    async def wait_for_change(self) -> None:
        await self.events.burst()

    routes_trigger = True

    async def wait_for_route_change(self) -> None:
        await self._route_events.wait()

    def _address_msg(self, change: AddressChange, adding: bool = False) -> Any:
        msg = ifaddrmsg()
        msg["prefixlen"] = change.prefixlen
        msg["index"] = change.index
        if isinstance(change.address, IPv4Address):
            msg["family"] = socket.AF_INET
            msg["attrs"] = [
                ("IFA_LOCAL", str(change.address)),
                ("IFA_ADDRESS", str(change.address)),
            ]
            if adding:  # not when removing: the kernel then wants labels to match
                label = NODE_ADDRESS_LABEL
                if change.interface != LOOPBACK or change.held:
                    label = cable_address_label(change.interface)
                msg["attrs"].append(("IFA_LABEL", label))
            return msg
        msg["family"] = socket.AF_INET6
        msg["attrs"] = [("IFA_ADDRESS", str(change.address)), ("IFA_FLAGS", IFA_F_NODAD)]
        if change.deprecated:  # valid for ever, preferred never
            lifetimes = {"ifa_preferred": 0, "ifa_valid": FOREVER, "cstamp": 0, "tstamp": 0}
            msg["attrs"].append(("IFA_CACHEINFO", lifetimes))
        return msg

    async def add_address(self, change: AddressChange) -> None:
        await self._request(
            self._address_msg(change, adding=True),
            RTM_NEWADDR,
            NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE,
        )

    async def set_link_up(self, link: Link, up: bool) -> None:
        msg = ifinfmsg()
        msg["family"] = socket.AF_UNSPEC
        msg["index"] = link.index
        msg["flags"] = IFF_UP if up else 0
        msg["change"] = IFF_UP
        await self._request(msg, RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK)

    async def set_mtu(self, link: Link, size: int) -> None:
        msg = ifinfmsg()
        msg["family"] = socket.AF_UNSPEC
        msg["index"] = link.index
        msg["attrs"] = [("IFLA_MTU", size)]
        await self._request(msg, RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK)

    far_link_locals = staticmethod(farprobe.far_link_locals)

    async def remove_address(self, change: AddressChange) -> None:
        try:
            await self._request(self._address_msg(change), RTM_DELADDR, NLM_F_REQUEST | NLM_F_ACK)
        except KernelError as error:
            if error.errno not in (errno.EADDRNOTAVAIL, errno.ENODEV):
                raise

    async def flush_babel_routes(self) -> int:
        routes = [r for r in await self._routes() if r["proto"] == RTPROT_BABEL]
        for route in routes:
            await self._delete_route(route)
        return len(routes)

    async def _routes(self, family: int = socket.AF_UNSPEC, keep: Keep | None = None) -> list[Any]:
        """Every route of every table (both families unless one is asked for), those `keep`
        wants."""
        query = rtmsg()
        query["family"] = family
        return await self._request(query, RTM_GETROUTE, NLM_F_REQUEST | NLM_F_DUMP, keep)

    async def read_routes_v4(self) -> list[HostRoute]:
        """The host's IPv4 routes, every table, as the clash check reads them (babeld's and
        the kernel's local-table entries for local addresses left out: addresses are
        checked as addresses)."""
        out = []
        for route in await self._routes(socket.AF_INET, host_route):
            dst = route.get_attr("RTA_DST") or "0.0.0.0"
            network = IPv4Network(f"{dst}/{route['dst_len']}", strict=False)
            table = route.get_attr("RTA_TABLE") or route["table"]
            out.append(HostRoute(network, f"route {network} table {table}"))
        return out

    async def read_rules(self) -> set[Rule]:
        """babblerd's policy-routing rules (protocol babel, at babblerd's priorities), both
        families."""
        query = fibmsg()
        query["family"] = socket.AF_UNSPEC
        out = set()
        for msg in await self._request(query, RTM_GETRULE, NLM_F_REQUEST | NLM_F_DUMP):
            rule = _rule_from(msg)
            if rule is not None:
                out.add(rule)
        return out

    async def add_rule(self, rule: Rule) -> None:
        """Add a rule unless it is there (without NLM_F_EXCL the kernel adds a twin)."""
        try:
            await self._request(
                _rule_msg(rule), RTM_NEWRULE, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL
            )
        except KernelError as error:
            if error.errno != errno.EEXIST:
                raise

    async def remove_rule(self, rule: Rule) -> None:
        try:
            await self._request(_rule_msg(rule), RTM_DELRULE, NLM_F_REQUEST | NLM_F_ACK)
        except KernelError as error:
            if error.errno != errno.ENOENT:
                raise

    async def _delete_route(self, route: Any) -> None:
        msg = rtmsg()
        for key in ("family", "dst_len", "src_len", "proto", "type", "scope"):
            msg[key] = route[key]
        msg["table"] = route["table"]
        msg["attrs"] = [
            (name, route.get_attr(name)) for name in _ROUTE_KEYS if route.get_attr(name) is not None
        ]
        try:
            await self._request(msg, RTM_DELROUTE, NLM_F_REQUEST | NLM_F_ACK)
        except KernelError as error:
            if error.errno != errno.ESRCH:
                raise


def _rule_msg(rule: Rule) -> Any:
    msg = fibmsg()
    msg["family"] = FAMILIES[rule.family]
    msg["action"] = ACTIONS[rule.action]
    msg["flags"] = FIB_RULE_INVERT if rule.invert else 0
    msg["table"] = rule.table if rule.table is not None and rule.table < 256 else 0
    attrs: list[tuple[str, Any]] = [("FRA_PRIORITY", rule.priority), ("FRA_PROTOCOL", RTPROT_BABEL)]
    if rule.table is not None:
        attrs.append(("FRA_TABLE", rule.table))
    if rule.iif is not None:
        attrs.append(("FRA_IIFNAME", rule.iif))
    for key, network in (("dst", rule.dst), ("src", rule.src)):
        if network is not None:
            address, length = network.split("/")
            msg[f"{key}_len"] = int(length)
            attrs.append((f"FRA_{key.upper()}", address))
    if rule.suppress_prefixlength is not None:
        attrs.append(("FRA_SUPPRESS_PREFIXLEN", rule.suppress_prefixlength))
    msg["attrs"] = attrs
    return msg


def _rule_from(msg: Any) -> Rule | None:
    """A rule the kernel listed, if it is one of babblerd's."""
    priority = msg.get_attr("FRA_PRIORITY") or 0
    if not ours(msg.get_attr("FRA_PROTOCOL"), priority):
        return None
    family = 4 if msg["family"] == socket.AF_INET else 6
    action = next((name for name, code in ACTIONS.items() if code == msg["action"]), None)
    if action is None:
        return None
    dst, src = msg.get_attr("FRA_DST"), msg.get_attr("FRA_SRC")
    suppress = msg.get_attr("FRA_SUPPRESS_PREFIXLEN")
    return Rule(
        family,
        priority,
        action,
        iif=msg.get_attr("FRA_IIFNAME"),
        invert=bool(msg["flags"] & FIB_RULE_INVERT),
        dst=f"{dst}/{msg['dst_len']}" if dst else None,
        src=f"{src}/{msg['src_len']}" if src else None,
        table=(msg.get_attr("FRA_TABLE") or msg["table"]) if action == "lookup" else None,
        suppress_prefixlength=None if suppress in (None, 0xFFFFFFFF) else suppress,
    )


_ROUTE_KEYS: Iterable[str] = ("RTA_DST", "RTA_SRC", "RTA_TABLE", "RTA_PRIORITY", "RTA_OIF")


@asynccontextmanager
async def open_linux_kernel() -> AsyncIterator[LinuxKernel]:
    kernel = LinuxKernel()
    try:
        yield kernel
    finally:
        kernel.close()
