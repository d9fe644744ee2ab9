"""What `babblerctl metrics` shows, pure: a node's `status` and `stats` (docs/protocol.md)
turned into metric families, named as Prometheus's conventions say (`babbler_` prefix,
snake_case, base units, `_total` for counters, `_info` for labels worth 1).

Both objects come from a socket and name other machines (names, versions, link names from
their node info), so nothing here trusts a key to be there or of its type: a missing key, a
null or a value of the wrong type leaves out that one sample, never the rest, and never
raises. Label text is bounded and made encodable; prometheus_client escapes it on the way
out (babbler/live/metrics.py). SPECS lists every family, in the order they are shown.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

PREFIX = "babbler_"
MAX_LABEL_CHARS = 200  # a peer's text bounded: one scrape stays small whatever it sends
MESH_STATES = ("idle", "waiting-for-interface", "starting", "running", "restarting")
IPV4_STATES = ("off", "waiting", "on", "refused")
# Problems status reports now, by kind (babeld.last_error is history: babeld_up says now).
PROBLEMS = {"kernel": "kernel_problem", "ipv4": "ipv4_problem", "node_id": "node_id_persist_error"}
COUNTER_KEYS = {  # the counters contract's keys (status.interfaces[].counters) -> family
    "rx_bytes": "babbler_link_receive_bytes_total",
    "tx_bytes": "babbler_link_transmit_bytes_total",
    "rx_packets": "babbler_link_receive_packets_total",
    "tx_packets": "babbler_link_transmit_packets_total",
}
BYTES_PER_MEGABIT = 125_000
NEIGHBOUR = ("link", "address", "node", "node_id")
NODE = ("node", "node_id")

Kind = Literal["gauge", "counter"]
Labels = tuple[str, ...]


@dataclass(frozen=True)
class Spec:
    """One metric family: its full name (a counter's ends in `_total`), type, labels, help."""

    name: str
    kind: Kind
    labels: Labels
    help: str


def _gauge(name: str, help: str, labels: Labels = ()) -> Spec:
    return Spec(PREFIX + name, "gauge", labels, help)


def _counter(name: str, help: str, labels: Labels = ()) -> Spec:
    return Spec(PREFIX + name + "_total", "counter", labels, help)


SPECS = (
    _gauge("up", "1 when babblerd answered on its socket, else 0 and nothing else is shown"),
    _gauge(
        "info",
        "this node: its name, node id, babbler and babeld versions, platform and mode (1)",
        ("node", "node_id", "version", "babeld_version", "platform", "mode"),
    ),
    _gauge("mesh_state", "1 for the mesh's state now, 0 for the others", ("state",)),
    _gauge("babeld_up", "1 while babblerd's babeld runs, else 0"),
    _counter("babeld_restarts", "times babeld was started again since babblerd started"),
    _gauge("clients", "clients connected to babblerd's socket (this scrape left out)"),
    _gauge(
        "ipv4_state",
        "1 for IPv4's state now (off, waiting, on, refused: ipv4_problem says why), else 0",
        ("state",),
    ),
    _gauge("problem", "1 while status reports a problem of this kind, else 0", ("kind",)),
    _gauge(
        "problem_info",
        "the problem status reports, in words (1 while it lasts)",
        ("kind", "problem"),
    ),
    _gauge("unmatched_interface_patterns", "--interface patterns that match no link at all"),
    _gauge("link_info", "a link babblerd may use, and its kind (1)", ("link", "kind")),
    _gauge("link_up", "1 when the link is up, else 0", ("link",)),
    _gauge("link_babel", "1 while babeld runs on the link, else 0", ("link",)),
    _gauge("link_speed_bytes_per_second", "the link's speed as its kernel says", ("link",)),
    _gauge("link_mtu_bytes", "the MTU the link runs at", ("link",)),
    _gauge("link_cost", "babeld's cost (rxcost) for the link", ("link",)),
    _counter("link_receive_bytes", "bytes received on the link", ("link",)),
    _counter("link_transmit_bytes", "bytes sent on the link", ("link",)),
    _counter("link_receive_packets", "packets received on the link", ("link",)),
    _counter("link_transmit_packets", "packets sent on the link", ("link",)),
    _gauge("neighbour_reach_ratio", "share of the neighbour's last 16 hellos heard", NEIGHBOUR),
    _gauge("neighbour_cost", "babeld's cost to the neighbour", NEIGHBOUR),
    _gauge("neighbour_rtt_seconds", "round-trip time to the neighbour, by babeld", NEIGHBOUR),
    _gauge("routes_installed", "routes babeld installed in the kernel", ("family",)),
    _gauge("nodes_known", "other nodes known (reachable, or lost in the last 10 minutes)"),
    _gauge("nodes_reachable", "other nodes reachable"),
    _gauge("node_reachable", "1 while the node is reachable, else 0", NODE),
    _gauge("node_hops", "hops to the node on the path babblerctl path shows", NODE),
    _gauge("node_route_metric", "babeld's metric of the route to the node", NODE),
    _gauge("node_info_age_seconds", "age of the node info held from the node", NODE),
    _gauge("node_info", "another node and the babbler version it runs (1)", (*NODE, "version")),
    _gauge("daemon_resident_memory_bytes", "babblerd's resident memory (macOS: its peak)"),
    _gauge("daemon_open_fds", "babblerd's open file descriptors"),
    _gauge("daemon_tasks", "babblerd's trio tasks"),
    _counter("babeld_lines", "lines read from babeld"),
    _counter("babeld_repeat_lines_dropped", "babeld's lines dropped as identical repeats"),
    _counter("node_info_asks", "node info asks made to other nodes"),
    _counter("node_info_answers", "node info answers given to other nodes"),
    _counter("node_info_pushes_sent", "node info pushes made to other nodes"),
    _counter("node_info_pushes_received", "node info pushes received from other nodes"),
)
SPEC = {spec.name: spec for spec in SPECS}


@dataclass(frozen=True)
class Family:
    """A family with its samples: (label values in the spec's order, value)."""

    spec: Spec
    samples: tuple[tuple[Labels, float], ...]


class _Families:
    """Samples gathered by family name; the first sample of a label set wins (a name listed
    twice in a status shows once: Prometheus refuses duplicate series)."""

    def __init__(self) -> None:
        self._samples: dict[str, dict[Labels, float]] = {name: {} for name in SPEC}

    def add(self, name: str, value: object, *labels: object) -> None:
        """One sample, left out when `value` is not a usable number (or, for a counter, is
        negative). Raises KeyError for a name SPECS lacks or a wrong count of labels (ours)."""
        spec = SPEC[name]
        if len(labels) != len(spec.labels):
            raise KeyError(f"{name} takes {len(spec.labels)} labels")
        number = _number(value)
        if number is None or (spec.kind == "counter" and number < 0):
            return
        self._samples[name].setdefault(tuple(_text(label) for label in labels), number)

    def families(self) -> list[Family]:
        """In SPECS's order; families without a sample left out."""
        return [
            Family(SPEC[name], tuple(samples.items()))
            for name, samples in self._samples.items()
            if samples
        ]


def families(status: object, stats: object) -> list[Family]:
    """The node's metrics from its `status` and `stats` objects (each None when it could
    not be read): `babbler_up` 0 and nothing else without a status; any value from the
    wire that is missing or of the wrong shape is left out."""
    out = _Families()
    if not isinstance(status, Mapping):
        out.add("babbler_up", 0)
        return out.families()
    out.add("babbler_up", 1)
    _node(out, status)
    _links(out, status)
    _neighbours(out, status)
    _routes(out, status)
    _nodes(out, status)
    if isinstance(stats, Mapping):
        _daemon(out, stats)
    return out.families()


def _node(out: _Families, status: Mapping[str, Any]) -> None:
    babeld = _mapping(status.get("babeld"))
    out.add(
        "babbler_info",
        1,
        *(status.get(key) for key in ("name", "node_id", "version")),
        babeld.get("version"),
        status.get("platform"),
        status.get("mode"),
    )
    _states(out, "babbler_mesh_state", MESH_STATES, status.get("mesh"))
    out.add("babbler_babeld_up", int(_number(babeld.get("pid")) is not None))
    out.add("babbler_babeld_restarts_total", babeld.get("restarts"))
    out.add("babbler_clients", status.get("clients"))
    _states(out, "babbler_ipv4_state", IPV4_STATES, _ipv4_state(status))
    for kind, key in PROBLEMS.items():
        problem = status.get(key)
        out.add("babbler_problem", int(bool(problem)), kind)
        if problem:
            out.add("babbler_problem_info", 1, kind, problem)
    globs = status.get("unmatched_globs")
    if isinstance(globs, list):
        out.add("babbler_unmatched_interface_patterns", len(globs))


def _states(out: _Families, name: str, known: Iterable[str], now: object) -> None:
    """An enum as Prometheus shows one: a sample per state, 1 for the one now (also one this
    version does not know), 0 for the others."""
    for state in known:
        out.add(name, int(state == now), state)
    if isinstance(now, str):
        out.add(name, 1, now)  # an unknown state (a newer babblerd's): shown, not dropped


def _ipv4_state(status: Mapping[str, Any]) -> str:
    if not status.get("ipv4_prefix"):
        return "off"
    if status.get("ipv4_problem"):
        return "refused"
    return "on" if status.get("node_address_v4") else "waiting"


def _links(out: _Families, status: Mapping[str, Any]) -> None:
    for link in _items(status.get("interfaces")):
        name = link.get("name")
        if not isinstance(name, str):
            continue
        out.add("babbler_link_info", 1, name, link.get("kind"))
        out.add("babbler_link_up", _flag(link.get("up")), name)
        out.add("babbler_link_babel", _flag(link.get("babel")), name)
        speed = _number(link.get("speed_mbps"))
        if speed is not None:
            out.add("babbler_link_speed_bytes_per_second", speed * BYTES_PER_MEGABIT, name)
        out.add("babbler_link_mtu_bytes", link.get("mtu"), name)
        out.add("babbler_link_cost", link.get("cost"), name)
        counters = _mapping(link.get("counters"))
        for key, family in COUNTER_KEYS.items():
            out.add(family, counters.get(key), name)


def _neighbours(out: _Families, status: Mapping[str, Any]) -> None:
    names = {
        node.get("node_id"): node.get("name")
        for node in _items(status.get("nodes"))
        if isinstance(node.get("node_id"), str)
    }
    for neighbour in _items(status.get("neighbours")):
        node_id = neighbour.get("node_id")
        labels = (
            neighbour.get("interface"),
            neighbour.get("address"),
            names.get(node_id) if isinstance(node_id, str) else None,
            node_id,
        )
        reach = _reach(neighbour.get("reach"))
        if reach is not None:
            out.add("babbler_neighbour_reach_ratio", reach, *labels)
        out.add("babbler_neighbour_cost", neighbour.get("cost"), *labels)
        rtt = _number(neighbour.get("rtt"))
        if rtt is not None:
            out.add("babbler_neighbour_rtt_seconds", round(rtt / 1000, 9), *labels)  # ms


def _reach(value: object) -> float | None:
    """babeld's reach (16 bits as hex, a bit per hello heard) as the share heard."""
    if not isinstance(value, str) or not 0 < len(value) <= 4:
        return None
    try:
        bits = int(value, 16)
    except ValueError:
        return None
    return bits.bit_count() / 16 if bits >= 0 else None


def _routes(out: _Families, status: Mapping[str, Any]) -> None:
    installed = {"ipv6": 0, "ipv4": 0}
    for route in _items(status.get("routes")):
        prefix = route.get("prefix")
        if route.get("installed") is True and isinstance(prefix, str):
            installed["ipv6" if ":" in prefix else "ipv4"] += 1
    for family, count in installed.items():
        out.add("babbler_routes_installed", count, family)


def _nodes(out: _Families, status: Mapping[str, Any]) -> None:
    nodes = [node for node in _items(status.get("nodes")) if isinstance(node.get("node_id"), str)]
    out.add("babbler_nodes_known", len(nodes))
    out.add("babbler_nodes_reachable", sum(node.get("reachable") is True for node in nodes))
    for node in nodes:
        labels = (node.get("name"), node.get("node_id"))
        out.add("babbler_node_reachable", _flag(node.get("reachable")), *labels)
        out.add("babbler_node_hops", node.get("hops"), *labels)
        out.add("babbler_node_route_metric", node.get("metric"), *labels)
        out.add("babbler_node_info_age_seconds", node.get("info_age_s"), *labels)
        if node.get("version") is not None:
            out.add("babbler_node_info", 1, *labels, node.get("version"))


def _daemon(out: _Families, stats: Mapping[str, Any]) -> None:
    for key, name in (
        ("rss_bytes", "babbler_daemon_resident_memory_bytes"),
        ("open_fds", "babbler_daemon_open_fds"),
        ("tasks", "babbler_daemon_tasks"),
        ("babeld_lines_in", "babbler_babeld_lines_total"),
        ("babeld_repeats", "babbler_babeld_repeat_lines_dropped_total"),
        ("info_asks", "babbler_node_info_asks_total"),
        ("info_answers", "babbler_node_info_answers_total"),
        ("info_pushes", "babbler_node_info_pushes_sent_total"),
        ("info_pushed", "babbler_node_info_pushes_received_total"),
    ):
        out.add(name, stats.get(key))


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _items(value: object) -> list[Mapping[str, Any]]:
    return [item for item in value if isinstance(item, Mapping)] if isinstance(value, list) else []


def _flag(value: object) -> float | None:
    return float(value) if isinstance(value, bool) else None


def _number(value: object) -> float | None:
    """A finite number (JSON may hold NaN and Infinity; a bool is no number here)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value) if not isinstance(value, int) or abs(value) < 2**64 else math.inf
    return number if math.isfinite(number) else None


def _text(value: object) -> str:
    """A label value: text as given (bounded, lone surrogates replaced so it can be encoded),
    anything else empty."""
    if not isinstance(value, str):
        return ""
    text = value[:MAX_LABEL_CHARS]
    return text.encode("utf-8", "replace").decode("utf-8")
