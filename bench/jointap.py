"""Where a join's time goes: marks taken while a node joins, from inside the namespaces.

A thread enters a namespace (setns on that thread only) and listens there, so the marks
cost no process while the join runs:
  - `Wire` on the far end of the new cable: the first Hello and IHU the new node sends (an
    IHU: its babeld has heard the far end, the neighbour is up both ways);
  - `Addresses` in the new node: the first global address added (babblerd adds its link
    and node addresses itself; babeld alone gets its address from the bench before exec);
  - `Routes` at the far end: when its kernel first routes to each destination.
`spawned_after` reads when a process was forked (/proc, 10 ms ticks) against a moment.
"""

from __future__ import annotations

import contextlib
import ctypes
import ipaddress
import os
import socket
import struct
import threading
import time
from pathlib import Path

CLONE_NEWNET = 0x40000000
ETH_P_IPV6 = 0x86DD
PACKET_OUTGOING = 4
BABEL_PORT = 6696
HELLO, IHU = 4, 5
RTM_NEWADDR, RTM_NEWROUTE = 20, 24
RTMGRP_IPV6_IFADDR, RTMGRP_IPV6_ROUTE = 0x100, 0x400
IFA_ADDRESS, RTA_DST = 1, 1
RTPROT_BABEL, RTN_UNICAST = 42, 1
TICKS = os.sysconf("SC_CLK_TCK")

_libc = ctypes.CDLL(None, use_errno=True)


def enter(netns: str) -> None:
    """Move the calling thread (only it) into a named network namespace."""
    fd = os.open(f"/run/netns/{netns}", os.O_RDONLY)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"setns {netns}: {os.strerror(errno)}")
    finally:
        os.close(fd)


def tlv_types(body: bytes) -> set[int]:
    """The TLV types in a Babel packet body (RFC 8966 4.2; Pad1 has no length)."""
    seen, at = set(), 0
    while at < len(body):
        kind = body[at]
        seen.add(kind)
        at += 1 if kind == 0 else 2 + (body[at + 1] if at + 1 < len(body) else 0)
    return seen


def babel_tlvs(packet: bytes) -> set[int] | None:
    """An IPv6 packet's Babel TLV types, or None when it is not a Babel packet."""
    if len(packet) < 52 or packet[6] != 17:  # no extension headers on Babel's packets
        return None
    if struct.unpack_from("!H", packet, 42)[0] != BABEL_PORT or packet[48] != 42:
        return None
    length = struct.unpack_from("!H", packet, 50)[0]
    return tlv_types(packet[52 : 52 + length])


class Tap:
    """A thread in a namespace that marks first events (name -> time.monotonic())."""

    def __init__(self, netns: str) -> None:
        self.marks: dict[str, float] = {}
        self._netns = netns
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        self._ready.wait(5)
        if self._error is not None:
            raise self._error

    def _run(self) -> None:
        try:
            enter(self._netns)
            sock = self.open()
        except OSError as error:
            self._error = error
            self._ready.set()
            return
        sock.settimeout(0.1)
        self._ready.set()
        with sock:
            while not self._stop.is_set():
                with contextlib.suppress(TimeoutError):
                    data, address = sock.recvfrom(65536)
                    self.seen(data, address, time.monotonic())

    def mark(self, name: str, at: float) -> None:
        self.marks.setdefault(name, at)

    def open(self) -> socket.socket:
        raise NotImplementedError

    def seen(self, data: bytes, address: object, at: float) -> None:
        raise NotImplementedError

    def close(self) -> dict[str, float]:
        self._stop.set()
        self._thread.join()
        return self.marks


class Wire(Tap):
    """Babel packets arriving on one interface (sent by the node at its other end)."""

    def __init__(self, netns: str, interface: str) -> None:
        self._interface = interface
        super().__init__(netns)

    def open(self) -> socket.socket:
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(ETH_P_IPV6))
        sock.bind((self._interface, ETH_P_IPV6))
        return sock

    def seen(self, data: bytes, address: object, at: float) -> None:
        if isinstance(address, tuple) and address[2] == PACKET_OUTGOING:
            return
        tlvs = babel_tlvs(data)
        if tlvs is None:
            return
        if HELLO in tlvs:
            self.mark("hello", at)
        if IHU in tlvs:
            self.mark("ihu", at)


def netlink(groups: int) -> socket.socket:
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
    sock.bind((0, groups))
    return sock


def messages(data: bytes, kind: int) -> list[bytes]:
    """The netlink messages of one type in a datagram (header included)."""
    found, at = [], 0
    while at + 16 <= len(data):
        length, this = struct.unpack_from("=IH", data, at)
        if this == kind:
            found.append(data[at : at + length])
        at += max((length + 3) & ~3, 16)
    return found


def attribute(message: bytes, start: int, wanted: int) -> bytes | None:
    """One rtattr's payload, attributes from `start` (after the fixed header)."""
    at = start
    while at + 4 <= len(message):
        length, kind = struct.unpack_from("=HH", message, at)
        if length < 4:
            return None
        if kind == wanted:
            return message[at + 4 : at + length]
        at += (length + 3) & ~3
    return None


class Addresses(Tap):
    """IPv6 addresses added in a namespace: the first of global scope, and when each came."""

    def __init__(self, netns: str) -> None:
        self.added: dict[str, float] = {}
        super().__init__(netns)

    def open(self) -> socket.socket:
        return netlink(RTMGRP_IPV6_IFADDR)

    def seen(self, data: bytes, address: object, at: float) -> None:
        for message in messages(data, RTM_NEWADDR):
            if message[19] != 0:  # ifaddrmsg: family, prefixlen, flags, scope; 0: global
                continue
            self.mark("address", at)
            value = attribute(message, 24, IFA_ADDRESS)
            if value is not None and len(value) == 16:
                self.added.setdefault(str(ipaddress.IPv6Address(value)), at)


class Routes(Tap):
    """Babel's IPv6 routes added to a namespace's kernel (any table): when each
    destination first came."""

    def __init__(self, netns: str) -> None:
        self.added: dict[str, float] = {}
        super().__init__(netns)

    def open(self) -> socket.socket:
        return netlink(RTMGRP_IPV6_ROUTE)

    def seen(self, data: bytes, address: object, at: float) -> None:
        for message in messages(data, RTM_NEWROUTE):
            # rtmsg: family, dst_len, src_len, tos, table, protocol, scope, type
            if message[21] != RTPROT_BABEL or message[23] != RTN_UNICAST:
                continue
            value = attribute(message, 28, RTA_DST)
            if value is not None and len(value) == 16:
                self.added.setdefault(str(ipaddress.IPv6Address(value)), at)


def spawned_after(pid: int, boot_then: float) -> float:
    """Seconds from `boot_then` (CLOCK_BOOTTIME) to the process's fork, to 1/CLK_TCK."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return int(fields[19]) / TICKS - boot_then
