"""Netlink messages dropped before they are parsed (daemon/links/nlfilter.py)."""

from __future__ import annotations

import socket

from hypothesis import given
from hypothesis import strategies as st
from pyroute2.netlink import NLMSG_DONE
from pyroute2.netlink.rtnl import RTM_NEWROUTE
from pyroute2.netlink.rtnl.marshal import MarshalRtnl
from pyroute2.netlink.rtnl.rtmsg import rtmsg

from babbler.daemon.links.nlfilter import HEADER, RTN_LOCAL, host_route, kept

RTN_UNICAST, RTPROT_KERNEL, RTPROT_BOOT, RTPROT_BABEL = 1, 2, 3, 42


def message(kind: int, body: bytes, sequence: int = 7) -> bytes:
    """One netlink message with the padding that aligns the next."""
    length = HEADER.size + len(body)
    return HEADER.pack(length, kind, 0, sequence, 0) + body + b"\0" * (-length % 4)


messages = st.lists(st.tuples(st.integers(16, 40), st.binary(max_size=40), st.booleans()))


@given(messages, st.binary(max_size=20))
def test_only_the_messages_wanted_are_left_in_order_with_a_broken_tail_as_it_was(
    listed: list[tuple[int, bytes, bool]], tail: bytes
) -> None:
    wanted = {(kind, body) for kind, body, keep in listed if keep}
    data = b"".join(message(kind, body) for kind, body, _ in listed)
    broken = tail if len(tail) < HEADER.size else HEADER.pack(999, 1, 0, 0, 0) + tail
    out = kept(data + broken, lambda kind, body: (kind, body) in wanted)
    expected = b"".join(message(kind, body) for kind, body, _ in listed if (kind, body) in wanted)
    assert out == expected + broken


def route(protocol: int, kind: int = RTN_UNICAST) -> bytes:
    msg = rtmsg()
    msg["family"] = socket.AF_INET
    msg["dst_len"] = 32
    msg["proto"] = protocol
    msg["type"] = kind
    msg["table"] = 254
    msg["attrs"] = [("RTA_DST", "10.77.1.2"), ("RTA_TABLE", 254)]
    msg["header"]["type"] = RTM_NEWROUTE
    msg["header"]["sequence_number"] = 7
    msg.encode()
    return bytes(msg.data)


def test_a_route_dump_keeps_the_hosts_routes_and_the_end_and_parses_the_same() -> None:
    """babeld's routes and local entries are never parsed; what is left parses as before."""
    done = message(NLMSG_DONE, b"\0" * 4)
    dump = route(RTPROT_BABEL) + route(RTPROT_BOOT) + route(RTPROT_KERNEL, RTN_LOCAL) + done
    parsed = list(MarshalRtnl().parse(kept(dump, host_route)))
    assert [m["header"]["type"] for m in parsed] == [RTM_NEWROUTE, NLMSG_DONE]
    assert parsed[0]["proto"] == RTPROT_BOOT and parsed[0].get_attr("RTA_DST") == "10.77.1.2"
