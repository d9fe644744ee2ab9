"""Node info (DESIGN.md "Node info over the mesh"): what a node tells other nodes about
itself, and who may ask how often. Pure.

The answer is one JSON object of at most ANSWER_CAP bytes: node id, name, version, uptime,
node address, the links babeld uses (kind, speed, cost), the neighbours as node ids where
the table tells (a neighbour is the node whose own range it announces with refmetric 0),
and the user's `[info]` fields.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass, field
from ipaddress import IPv6Address
from typing import Any

from babbler.core.addressing import MESH_PREFIX, format_node_id
from babbler.core.config import MAX_NAME
from babbler.core.views import Facts, interfaces, neighbour_nodes

ANSWER_CAP = 16 * 1024  # bytes, newline included
REQUEST = b"info"
PUSH = b"push"  # then the pusher's own info, one JSON line (docs/protocol.md)
COUNTERS = b"counters"  # the answer: this node's link counters, one JSON line


def neighbours(facts: Facts) -> list[dict[str, Any]]:
    """babeld's neighbours, each with the node id it announces as its own (None until a
    route from it says)."""
    nodes = neighbour_nodes(facts.table)
    return [
        {
            "node_id": nodes.get((entry.field("address"), entry.field("if"))),
            "interface": entry.field("if"),
            "address": entry.field("address"),
        }
        for entry in facts.table.entries("neighbour")
    ]


def answer(
    facts: Facts,
    name: str,
    fields: tuple[tuple[str, str | int | float | bool], ...],
    uptime_s: float,
    node_address: IPv6Address,
) -> dict[str, Any]:
    return {
        "node_id": format_node_id(facts.node_id),
        "name": name[:MAX_NAME],  # a host name may be longer (macOS): others take at most this
        "version": facts.version,
        "uptime_s": round(uptime_s, 1),
        "node_address": str(node_address),
        "interfaces": [
            {k: i[k] for k in ("name", "kind", "speed_mbps", "cost", "mtu", "max_mtu")}
            for i in interfaces(facts)
            if i["babel"]
        ],
        "neighbours": neighbours(facts),
        "info": dict(fields),
        "node_address_v4": facts.ipv4.get("node_address_v4"),
        "cables": facts.ipv4.get("addresses_v4", []),  # interface, address, peer
        "rdma": facts.rdma,  # RDMA over Thunderbolt readiness (core/rdma.py); None: Linux
    }


def encode(value: dict[str, Any]) -> bytes:
    """One JSON line, never over ANSWER_CAP: lists are shortened (and `truncated` set)
    until it fits."""
    value = dict(value)
    while True:
        data = (json.dumps(value, separators=(",", ":")) + "\n").encode()
        if len(data) <= ANSWER_CAP:
            return data
        value["truncated"] = True
        longest = max(("interfaces", "neighbours", "cables"), key=lambda k: len(value[k]))
        if value[longest]:
            value[longest] = value[longest][: len(value[longest]) // 2]
        elif value["info"]:
            value["info"] = {}
        else:  # cannot happen with the settings' limits; never send more than the cap
            return data[: ANSWER_CAP - 1] + b"\n"


def encode_counters(value: dict[str, Any]) -> bytes:
    """A `counters` answer as one JSON line, never over ANSWER_CAP (about 140 links): the
    links beyond are left out (`truncated`)."""
    value = dict(value)
    while True:
        data = (json.dumps(value, separators=(",", ":")) + "\n").encode()
        if len(data) <= ANSWER_CAP or not value["interfaces"]:
            return data
        value["truncated"] = True
        value["interfaces"] = value["interfaces"][: len(value["interfaces"]) // 2]


def from_the_mesh(source: IPv6Address) -> bool:
    """Only nodes of the mesh may ask (their mesh addresses are the sources)."""
    return source in MESH_PREFIX


# `counters` asks taken from one source: a viewer asks each node once a second, with a
# little room for a late one. On top of the bucket every connection of a source takes from
# (`RateLimit()`'s 2 a second, info's and pushes' too): at one ask a second a viewer leaves
# half of that to node info, and a source that asks counters faster is told so.
COUNTERS_RATE = 2.0  # a second
COUNTERS_BURST = 4.0


@dataclass
class RateLimit:
    """A token bucket per source: `rate` requests a second, bursts of `burst`; at most
    `sources` sources are remembered (the least recently seen is forgotten first)."""

    rate: float = 2.0
    burst: float = 10.0
    sources: int = 4096
    _buckets: OrderedDict[Any, tuple[float, float]] = field(default_factory=OrderedDict)

    def allow(self, source: Any, now: float) -> bool:
        tokens, then = self._buckets.pop(source, (self.burst, now))
        tokens = min(self.burst, tokens + (now - then) * self.rate)
        allowed = tokens >= 1.0
        self._buckets[source] = (tokens - 1.0 if allowed else tokens, now)
        while len(self._buckets) > self.sources:
            self._buckets.popitem(last=False)
        return allowed
