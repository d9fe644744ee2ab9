"""Typed forms of babblerd's JSON: `status`, its `nodes`, and `watch` lines (pure).

Field names are the JSON keys of docs/schema/*.schema.json. babblerd may add keys; every
object keeps what it was made from in `raw`, so a newer key is reachable before this module
names it. A value of the wrong shape raises ProtocolError.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal, TypeAlias

from babbler.client.errors import ProtocolError

Json: TypeAlias = Mapping[str, Any]
NodeAction: TypeAlias = Literal["up", "down", "changed"]
_RAW = field(repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class Babeld:
    pid: int | None
    version: str | None
    restarts: int
    last_error: str | None
    my_id: str  # babeld's router id, `aa:bb:...`
    found: bool  # False: no babeld program on this machine
    last_error_age_s: float | None = None  # how long ago last_error happened


@dataclass(frozen=True, slots=True)
class Interface:
    """A link babblerd selected (status `interfaces`; a node's `links` have the same form)."""

    name: str
    kind: str  # ethernet, thunderbolt, other
    speed_mbps: int | None
    cost: int
    up: bool = True
    babel: bool = True
    brought_up: bool = False  # babblerd brought it up (Thunderbolt, --bring-up)
    mtu: int | None = None  # bytes (None: not said)
    max_mtu: int | None = None  # the largest the link takes (None: not said)
    # status only: {rx_bytes, tx_bytes, rx_packets, tx_packets} as read at the status's
    # `counters_at` (None: not readable, or a babblerd older than counters)
    counters: Mapping[str, int] | None = None


@dataclass(frozen=True, slots=True)
class Address:
    interface: str
    address: str


@dataclass(frozen=True, slots=True)
class CableAddress:
    """This node's end of one cable: its IPv4 address there and the far end's (a /31)."""

    interface: str
    address: str
    peer: str


@dataclass(frozen=True, slots=True)
class Neighbour:
    address: str | None  # link-local
    interface: str | None
    reach: str | None
    rxcost: int | None
    txcost: int | None
    cost: int | None
    rtt: float | None  # milliseconds
    node_id: str | None  # the node it is, once a route from it says


@dataclass(frozen=True, slots=True)
class Route:
    prefix: str | None
    router_id: str | None
    metric: int | None
    refmetric: int | None
    installed: bool
    via: str | None
    interface: str | None


@dataclass(frozen=True, slots=True)
class NodeNeighbour:
    """A neighbour as another node's info lists it."""

    node_id: str | None
    interface: str | None


@dataclass(frozen=True, slots=True)
class Node:
    """Another machine of the mesh (status `nodes`, `watch` node events)."""

    node_id: str
    name: str | None  # from its node info; None until it answered
    node_address: str
    reachable: bool
    metric: int | None
    interface: str | None  # the first link towards it
    via: str | None  # the neighbour towards it (link-local)
    hops: int | None  # in status only: hops in the graph the node infos give
    version: str | None
    info: Mapping[str, Any]  # its `[info]` table
    info_age_s: float | None
    error: str | None  # why the last ask for its info failed
    neighbours: tuple[NodeNeighbour, ...]
    links: tuple[Interface, ...]
    node_address_v4: str | None  # its IPv4 node address, from its info
    cables: tuple[CableAddress, ...]  # its cable addresses, from its info ((): none yet)
    # Without a usable route: for how long while still held `reachable` (the down hold),
    # then how long ago it was last reachable (None while reachable, or from an old babblerd).
    route_lost_s: float | None
    last_seen_s: float | None
    raw: Json = _RAW

    @property
    def label(self) -> str:
        """Its name, or its node id until it has told its name."""
        return self.name or self.node_id


@dataclass(frozen=True, slots=True)
class Status:
    """This node's state: the answer to `status`."""

    version: str
    node_id: str
    name: str
    node_address: str
    range: str
    mode: str  # always, on-demand
    mesh: str  # idle, waiting-for-interface, starting, running, restarting
    keyed: bool
    babeld: Babeld
    addresses: tuple[Address, ...]
    interfaces: tuple[Interface, ...]
    neighbours: tuple[Neighbour, ...]
    routes: tuple[Route, ...]
    nodes: tuple[Node, ...]
    clients: int
    # IPv4 (None, None, None, () from a babblerd older than IPv4): the prefix (None: off),
    # this node's IPv4 node address (None: off or refused), why IPv4 is refused, the cables.
    ipv4_prefix: str | None
    node_address_v4: str | None
    ipv4_problem: str | None
    addresses_v4: tuple[CableAddress, ...]
    # What the kernel failed in babblerd's last reconcile (null: nothing; None too from a
    # babblerd older than it).
    kernel_problem: str | None
    # The platform babblerd acts as: "linux" or "macos" (None from a babblerd older than it).
    platform: str | None
    # This node's monotonic clock (seconds) when the interfaces' counters were read (None:
    # not read, or a babblerd older than counters).
    counters_at: float | None
    raw: Json = _RAW


@dataclass(frozen=True, slots=True)
class LinkCounters:
    """One link's counters since the link was made: bytes and packets in (rx) and out (tx)."""

    name: str
    rx_bytes: int
    tx_bytes: int
    rx_packets: int
    tx_packets: int


@dataclass(frozen=True, slots=True)
class NodeCounters:
    """One node's links' counters as that node read them: `at` on ITS monotonic clock
    (compare the `at`s of one node only), `age_s` how long ago the reading arrived here."""

    node_id: str
    at: float
    age_s: float
    interfaces: tuple[LinkCounters, ...]
    raw: Json = _RAW


@dataclass(frozen=True, slots=True)
class Counters:
    """The answer to `counters`: this node first, then the other nodes read while someone
    asked in the last 3 s. A rate is (bytes2 - bytes1) / (at2 - at1) between two readings
    of one node; a counter that went down is a new start, not a negative rate."""

    at: float  # this node's monotonic clock when it answered
    nodes: tuple[NodeCounters, ...]
    raw: Json = _RAW


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The first line of `watch`: the whole status. After a reconnect a new one comes."""

    status: Status
    type: Literal["snapshot"] = "snapshot"


@dataclass(frozen=True, slots=True)
class NodeEvent:
    """A node came (`up`: newly reachable), went (`down`) or changed (name, path, info)."""

    action: NodeAction
    node: Node
    type: Literal["node"] = "node"


@dataclass(frozen=True, slots=True)
class Change:
    """Any other `watch` event, as JSON: `value` is the new value (`mesh`, `addresses`,
    `interfaces`, `babeld`, `node_id`) or the table entry (`neighbour`, `route`, `xroute`,
    `interface`, with `action` add, change or flush). Types may be added: ignore unknown ones."""

    type: str
    action: str | None
    value: Any


@dataclass(frozen=True, slots=True)
class Lost:
    """Not from babblerd: a reconnecting `watch` lost its connection and is retrying.
    The next event after it is a Snapshot."""

    reason: str
    type: Literal["lost"] = "lost"


Event: TypeAlias = Snapshot | NodeEvent | Change | Lost


def _fields(cls: Any, obj: Json, **extra: Any) -> dict[str, Any]:
    """The keyword arguments of dataclass `cls` from the JSON object, `extra` given."""
    names = [f.name for f in fields(cls) if f.name != "raw" and f.name not in extra]
    return {**{n: obj[n] for n in names}, **extra}


def _interface(obj: Json) -> Interface:
    return Interface(
        name=obj["name"],
        kind=obj["kind"],
        speed_mbps=obj["speed_mbps"],
        cost=obj["cost"],
        up=obj.get("up", True),
        babel=obj.get("babel", True),
        brought_up=obj.get("brought_up", False),
        mtu=obj.get("mtu"),
        max_mtu=obj.get("max_mtu"),
        counters=obj.get("counters"),
    )


def _node(obj: Json) -> Node:
    return Node(
        **_fields(
            Node,
            obj,
            hops=obj.get("hops"),
            neighbours=tuple(
                NodeNeighbour(n["node_id"], n["interface"]) for n in obj["neighbours"]
            ),
            links=tuple(_interface(link) for link in obj["links"]),
            node_address_v4=obj.get("node_address_v4"),
            cables=_cables(obj.get("cables")),
            route_lost_s=obj.get("route_lost_s"),
            last_seen_s=obj.get("last_seen_s"),
        ),
        raw=obj,
    )


def _cables(listed: Any) -> tuple[CableAddress, ...]:
    return tuple(CableAddress(a["interface"], a["address"], a["peer"]) for a in listed or ())


def _status(obj: Json) -> Status:
    return Status(
        **_fields(
            Status,
            obj,
            babeld=Babeld(
                **_fields(
                    Babeld, obj["babeld"], last_error_age_s=obj["babeld"].get("last_error_age_s")
                )
            ),
            addresses=tuple(Address(a["interface"], a["address"]) for a in obj["addresses"]),
            interfaces=tuple(_interface(i) for i in obj["interfaces"]),
            neighbours=tuple(
                Neighbour(**_fields(Neighbour, n, node_id=n.get("node_id")))
                for n in obj["neighbours"]
            ),
            routes=tuple(Route(**_fields(Route, r)) for r in obj["routes"]),
            nodes=tuple(_node(n) for n in obj["nodes"]),
            ipv4_prefix=obj.get("ipv4_prefix"),
            node_address_v4=obj.get("node_address_v4"),
            ipv4_problem=obj.get("ipv4_problem"),
            addresses_v4=_cables(obj.get("addresses_v4")),
            kernel_problem=obj.get("kernel_problem"),
            platform=obj.get("platform"),
            counters_at=obj.get("counters_at"),
        ),
        raw=obj,
    )


def _counters(obj: Json) -> Counters:
    return Counters(
        at=float(obj["at"]),
        nodes=tuple(
            NodeCounters(
                node_id=node["node_id"],
                at=float(node["at"]),
                age_s=float(node["age_s"]),
                interfaces=tuple(
                    LinkCounters(**_fields(LinkCounters, link)) for link in node["interfaces"]
                ),
                raw=node,
            )
            for node in obj["nodes"]
        ),
        raw=obj,
    )


def _parsed(text: str) -> Json:
    try:
        obj = json.loads(text)
    except ValueError:
        raise ProtocolError(f"not JSON: {text[:80]!r}") from None
    if not isinstance(obj, dict):
        raise ProtocolError(f"not a JSON object: {text[:80]!r}")
    return obj


def _shaped(what: str, parse: Any, obj: Json) -> Any:
    try:
        return parse(obj)
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise ProtocolError(
            f"{what} of an unexpected shape ({type(error).__name__}: {error})"
        ) from None


def parse_status(text: str | Json) -> Status:
    """A Status from `status`'s JSON line (or the object already decoded)."""
    obj = _parsed(text) if isinstance(text, str) else text
    status: Status = _shaped("status", _status, obj)
    return status


def parse_counters(text: str | Json) -> Counters:
    """Counters from `counters`'s JSON line (or the object already decoded)."""
    obj = _parsed(text) if isinstance(text, str) else text
    counters: Counters = _shaped("counters", _counters, obj)
    return counters


def parse_node(obj: Json) -> Node:
    node: Node = _shaped("node", _node, obj)
    return node


def parse_event(text: str) -> Event:
    """One `watch` line as an event."""
    obj = _parsed(text)
    kind = obj.get("type")
    if not isinstance(kind, str):
        raise ProtocolError(f"a watch line without a type: {text[:80]!r}")
    if kind == "snapshot":
        return Snapshot(parse_status(_shaped("snapshot", lambda o: o["status"], obj)))
    action = obj.get("action")
    if kind == "node":
        if action not in ("up", "down", "changed"):
            raise ProtocolError(f"a node event with action {action!r}")
        return NodeEvent(action, parse_node(_shaped("node event", lambda o: o["node"], obj)))
    return Change(kind, action, obj.get(kind))
