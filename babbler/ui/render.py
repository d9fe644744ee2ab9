"""What people read (pure): the status, the other nodes and the path to one as tables, and
the one way every command finds a node from a name, node id or node address.

Every text shown is escaped (core/printable.py): names, versions and link names come from
other machines, and a terminal must only print them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from ipaddress import IPv4Address, IPv6Address, IPv6Network, ip_address, ip_network
from textwrap import wrap
from typing import Any

from babbler.client.model import Address, Node, Status
from babbler.core.addressing import owner_of
from babbler.core.errors import BabblerError
from babbler.core.graph import Graph
from babbler.core.printable import escape


def table(rows: list[list[str]], headers: list[str]) -> list[str]:
    rows = [[escape(str(cell)) for cell in row] for row in rows]
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows, strict=False)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return ["  " + fmt.format(*headers).rstrip()] + ["  " + fmt.format(*r).rstrip() for r in rows]


def text(value: Any) -> str:
    return "-" if value is None else escape(str(value))


def lines_of(lines: list[str]) -> str:
    """Lines as one text, each escaped: a newline inside one is shown, never taken."""
    return "\n".join(escape(line) for line in lines)


def speed(mbps: int | None) -> str:
    if mbps is None:
        return "-"
    return f"{mbps / 1000:g}G" if mbps >= 1000 else f"{mbps}M"


def _next_hops(s: Status) -> dict[str, str]:
    """Node id -> the name (or id) of the neighbour babeld's route to it goes through: the
    route's `via` and link, looked up among `status.neighbours` (which say their node id)."""
    names = {n.node_id: n.label for n in s.nodes}
    neighbour = {(m.address, m.interface): m.node_id for m in s.neighbours}
    out = {}
    for node in s.nodes:
        hop = neighbour.get((node.via, node.interface)) if node.reachable else None
        if hop is not None:
            out[node.node_id] = names.get(hop, hop)
    return out


def last_seen(node: Node) -> str:
    if node.last_seen_s is None:
        return "not reachable now"
    return f"last seen {seconds(node.last_seen_s)} ago"


def seconds(value: float) -> str:
    """A duration as people read it: 0.4 s, 12 s, 5 min, 2 h."""
    if value < 10:
        return f"{value:.1f} s"
    if value < 120:
        return f"{value:.0f} s"
    return f"{value / 60:.0f} min" if value < 7200 else f"{value / 3600:.0f} h"


def render_nodes(s: Status) -> list[str]:
    """The other nodes, a line each (status's `nodes`)."""
    if not s.nodes:
        return ["nodes: no other node known yet"]
    speeds = {i.name: i.speed_mbps for i in s.interfaces}
    hops = _next_hops(s)
    rows = [
        [
            text(n.name),
            n.node_id,
            n.node_address,
            text(n.node_address_v4),
            text(n.hops),
            "unreachable"
            if not n.reachable
            else "rerouting"
            if n.metric is None
            else str(n.metric),
            text(n.interface),
            speed(speeds.get(n.interface)) if n.interface else "-",
            hops.get(n.node_id, "-"),
            "-" if n.info_age_s is None else seconds(n.info_age_s),
            "-" if n.last_seen_s is None else f"{seconds(n.last_seen_s)} ago",
        ]
        for n in s.nodes
    ]
    headers = [
        "NAME", "NODE ID", "ADDRESS", "IPV4", "HOPS", "METRIC", "LINK", "SPEED", "NEXT HOP",
        "INFO AGE", "LAST SEEN",
    ]  # fmt: skip
    return ["nodes", *table(rows, headers)]


def path_of(s: Status, what: str) -> dict[str, Any]:
    """The path to a node as data (`babblerctl path --json`): from the graph the node infos
    give, checked against babeld's route. Raises BabblerError when there is none."""
    graph = Graph.from_status(s.raw)
    target = node_id(s, what)
    if target == graph.me:
        return {"from": graph.names[target], "to": graph.names[target], "hops": 0, "steps": []}
    node = find_node(s, target)
    if node is None:  # in someone's info, not routed from here
        raise BabblerError(f"no route to {graph.names[target]} (babblerctl nodes)")
    if not node.reachable:
        raise BabblerError(f"no path to {node.label} ({last_seen(node)})")
    steps = graph.path(target, first=node.interface)
    if steps is None:
        raise BabblerError(f"no path to {graph.names[target]} in what the node infos say")
    return {
        "from": graph.names[graph.me],
        "to": graph.names[target],
        "node_id": target,
        "hops": len(steps),
        "cost": sum(e.cost for _, e in steps),
        "metric": node.metric,  # babeld's (null while rerouting)
        "interface": node.interface,  # where babeld's route leaves
        "steps": [
            {
                "from": graph.names[frm],
                "interface": e.interface,
                "cost": e.cost,
                "to": graph.names[e.to],
            }
            for frm, e in steps
        ],
    }


def render_path(s: Status, what: str) -> str:
    """The path to a node, hop by hop with names, links and costs (path_of as text)."""
    p = path_of(s, what)
    if not p["steps"]:
        return escape(f"{p['to']} is this node")
    hops = p["hops"]
    metric = "rerouting" if p["metric"] is None else p["metric"]
    lines = [
        f"{p['from']} -> {p['to']}: {hops} {'hop' if hops == 1 else 'hops'}, cost {p['cost']}, "
        f"babeld's metric {metric}"
    ]
    for step in p["steps"]:
        lines.append(
            f"  {step['from']}  {text(step['interface'])} (cost {step['cost']})  -> {step['to']}"
        )
    first = p["steps"][0]["interface"]
    if p["interface"] is not None and p["interface"] != first:
        lines.append(
            f"  note: babeld's route leaves by {p['interface']}, not {first}: "
            "the node infos are behind the routes (a node is asked again when its links change)"
        )
    return lines_of(lines)


def nodes_json(s: Status) -> list[dict[str, Any]]:
    """`babblerctl nodes --json`: status's nodes, each with the name of its next hop."""
    hops = _next_hops(s)
    return [{**n.raw, "next_hop": hops.get(n.node_id)} for n in s.nodes]


# `babblerctl stats`: each key of babblerd's answer (docs/protocol.md) as people read it,
# and what it counts (its --help lists them). Counts are since babblerd started.
STATS = {
    "pid": ("process id", "babblerd's process id"),
    "tasks": ("tasks", "trio tasks running in babblerd (one only growing is a leak)"),
    "open_fds": ("open files", "file descriptors babblerd holds open (sockets included)"),
    "rss_bytes": ("memory", "resident memory (on macOS the peak)"),
    "clients": ("clients", "programs connected to the public socket now"),
    "babeld_lines_in": ("babeld lines read", "lines read from babeld's control socket"),
    "babeld_repeats": (
        "babeld repeats dropped",
        "of those, lines dropped as identical repeats of the entry babblerd already had",
    ),
    "babeld_held": (
        "neighbour changes held",
        "neighbour changes that waited in the reader because no monitor or watch client was"
        " connected (applied when the table is next read)",
    ),
    "info_asks": ("node info asks made", "node info asked of other nodes"),
    "info_answers": ("node info answers given", "node info asks of other nodes answered"),
    "info_pushes": ("node info pushes made", "this node's info pushed to others on change"),
    "info_pushed": ("node info pushes taken", "other nodes' infos pushed to this one"),
    "counters_asks": (
        "counters asks made",
        "link counters asked of other nodes (only while a live view is open)",
    ),
    "counters_answers": ("counters answers given", "link counters asks of other nodes answered"),
    "items_out": (
        "lines queued to clients",
        "live lines and events queued to clients, once per client",
    ),
}
STATS_HELP = "\n".join(
    "\n".join(
        wrap(f"{label}: {meaning}", 76, initial_indent=f"{key:<16} ", subsequent_indent=" " * 17)
    )
    for key, (label, meaning) in STATS.items()
)  # babblerctl stats --help: key, name and meaning, in 80 columns


def _stat(key: str, value: Any) -> str:
    if key == "rss_bytes" and isinstance(value, int):
        return f"{value / (1 << 20):.1f} MiB"
    if isinstance(value, int) and not isinstance(value, bool) and key != "pid":
        return f"{value:,}"
    return str(value)


def render_stats(stats: dict[str, Any]) -> list[str]:
    """`babblerctl stats` on a terminal: a line each, named and in units as people read
    them (STATS; a key it does not know as babblerd said it), nested keys dotted."""
    rows = _stat_rows(stats, "")
    width = max((len(name) for name, _ in rows), default=0)
    return [escape(f"{name + ':':<{width + 1}} {value}") for name, value in rows]


def _stat_rows(stats: dict[str, Any], prefix: str) -> list[tuple[str, str]]:
    rows = []
    for key, value in stats.items():
        if isinstance(value, dict):
            rows += _stat_rows(value, f"{prefix}{key}.")
        else:
            name = STATS[key][0] if not prefix and key in STATS else f"{prefix}{key}"
            rows.append((name, _stat(key, value)))
    return rows


def babeld_version(version: str | None) -> str:
    """babeld's version as it follows the word babeld: `1.12.1` (babeld -V says
    `babeld-1.12.1`), `-` when unknown."""
    return text(version.removeprefix("babeld-") if version else None)


def render_status(s: Status, routes: bool = False) -> str:
    """The status as a person reads it: this node, its links, its neighbours by name, the
    other nodes; babeld's routes as one line (all of them with `routes`)."""
    b = s.babeld
    keyed = "keyed" if s.keyed else "open (no mesh key)"
    lines = [
        f"node {s.node_id}" + (f" ({s.name})" if s.name else "") + f"  address {s.node_address}",
        f"mode {s.mode}  mesh {s.mesh}  {keyed}  other clients {s.clients}",
        f"babeld {babeld_version(b.version)}  pid {text(b.pid)}  "
        f"restarts {b.restarts}  router id {text(b.my_id)}",
    ]
    if not b.found:
        lines.append("  babeld NOT FOUND: install it (Debian: apt-get install babeld)")
    if s.node_address_v4:
        lines.append(f"ipv4 {s.node_address_v4}  prefix {s.ipv4_prefix}")
    elif s.ipv4_problem:
        lines.append(f"ipv4 REFUSED: {s.ipv4_problem}")
    elif s.ipv4_prefix is None:
        lines.append("ipv4 off")
    if s.kernel_problem:
        lines.append(
            f"  KERNEL: {s.kernel_problem} (babblerd keeps the last good state and retries)"
        )
    if b.last_error:
        when = "" if b.last_error_age_s is None else f" ({seconds(b.last_error_age_s)} ago)"
        lines.append(f"  last error{when}: {b.last_error}")
    for pattern in s.raw.get("unmatched_globs") or []:
        lines.append(f"  --interface {pattern} matches no link")
    lines.append("")
    if s.interfaces:
        lines.append("interfaces")
        addresses = {a.interface: a.address for a in s.addresses}
        cables: dict[str, list[str]] = {}
        for cable in s.addresses_v4:
            cables.setdefault(cable.interface, []).append(cable.address)
        lines += table(
            [
                [
                    i.name,
                    i.kind,
                    "up" if i.up else "down",
                    speed(i.speed_mbps),
                    text(i.cost),
                    "yes" if i.babel else "no",
                    addresses.get(i.name, "-"),
                    ",".join(cables.get(i.name, [])) or "-",
                ]
                for i in s.interfaces
            ],
            ["NAME", "KIND", "STATE", "SPEED", "COST", "BABEL", "ADDRESS", "IPV4"],
        )
    else:
        lines.append("interfaces: none eligible")
    if s.neighbours:
        lines.append("neighbours")
        names = {n.node_id: n.label for n in s.nodes}
        lines += table(
            [
                [
                    names.get(n.node_id or "", n.node_id or "?"),
                    text(n.interface),
                    text(n.address),
                    text(n.reach),
                    text(n.cost),
                    "-" if n.rtt is None else f"{n.rtt:.2f} ms",
                ]
                for n in s.neighbours
            ],
            ["NODE", "IF", "LINK-LOCAL", "REACH", "COST", "RTT"],
        )
    else:
        lines.append("neighbours: none")
    installed = sorted((r for r in s.routes if r.installed), key=lambda r: r.prefix or "")
    others = len(s.routes) - len(installed)
    if routes and installed:
        lines.append("routes")
        rows = [[text(r.prefix), text(r.metric), text(r.via), text(r.interface)] for r in installed]
        lines += table(rows, ["PREFIX", "METRIC", "VIA", "IF"])
        if others:
            noun = "route" if others == 1 else "routes"
            lines.append(f"  ({others} more {noun} not installed: babblerctl status --json)")
    else:
        reached = sum(1 for n in s.nodes if n.reachable)
        more = " (babblerctl status --routes lists them)" if installed else ""
        lines.append(
            f"routes: {len(installed)} installed, {reached} of {len(s.nodes)} other nodes"
            f" reachable{more}"
        )
    lines += render_nodes(s)
    return lines_of(lines)


def _address(text: str | None) -> IPv6Address | IPv4Address | None:
    try:
        return ip_address(text or "")
    except ValueError:
        return None


def link_addresses(s: Status, node: Node | None = None) -> list[Address]:
    """This node's IPv6 link addresses (`status.addresses`), or `node`'s: the /128s of its
    range its babeld announces, read from babeld's routes here (its node info does not list
    them, so their link is not known: interface "")."""
    if node is None:
        return list(s.addresses)
    found: set[IPv6Address] = set()
    for route in s.routes:
        try:
            prefix = ip_network(route.prefix or "")
        except ValueError:
            continue
        mine = isinstance(prefix, IPv6Network) and f"{owner_of(prefix) or 0:012x}" == node.node_id
        if mine and prefix.prefixlen == 128:
            found.add(IPv6Address(prefix.network_address))
    # its node address is no link's; bench -4 hands in nodes whose node address is the IPv4 one
    return [Address("", str(a)) for a in sorted(found) if str(a) != node.node_address]


def _claimed(s: Status, node: Node) -> list[str | None]:
    """The addresses of another node's links and cables: its cable addresses come from its
    info (what it says), its link addresses from babeld's routes, its link-local from the
    neighbour babeld met here."""
    known: list[str | None] = [c.address for c in node.cables]
    known += [a.address for a in link_addresses(s, node)]
    return known + [m.address for m in s.neighbours if m.node_id == node.node_id]


def _matches(s: Status, what: str) -> Iterator[dict[str, str | None]]:
    """The nodes (node id -> name) `what` names at each step, most trusted first: a node id;
    this node's own addresses and the IPv6 node addresses (made from the node ids); the IPv4
    node addresses (from the nodes' infos); a name; the addresses of links and cables. An
    address is never taken for a name (anyone may call itself 10.0.0.5)."""
    address = _address(what.split("%")[0])  # fe80::1%v1x2 as ip prints it
    everyone = [(s.node_id, s.name), *((n.node_id, n.name) for n in s.nodes)]

    def having(
        known: Iterable[tuple[str, str | None, Sequence[str | None]]],
    ) -> dict[str, str | None]:
        if address is None:
            return {}
        return {i: name for i, name, found in known if any(address == _address(a) for a in found)}

    yield {i: name for i, name in everyone if i.casefold() == what.casefold()}
    mine: list[str | None] = [s.node_address, s.node_address_v4]
    mine += [a.address for a in s.addresses] + [c.address for c in s.addresses_v4]
    yield having(
        [(s.node_id, s.name, mine), *((n.node_id, n.name, [n.node_address]) for n in s.nodes)]
    )
    yield having((n.node_id, n.name, [n.node_address_v4]) for n in s.nodes)
    yield {} if address is not None else {i: name for i, name in everyone if name == what}
    yield having((n.node_id, n.name, _claimed(s, n)) for n in s.nodes)


def node_id(s: Status, what: str) -> str:
    """The node id of the node `what` names: this node or another that status lists, by node
    id (any case), node address, name, or an address of its links and cables, in that order
    of trust (_matches): what another node says of itself never takes a node from a more
    trusted step. Raises BabblerError (one text for every command), also when `what` names
    more than one node at one step (two nodes claiming one cable address, or one name)."""
    for found in _matches(s, what):
        if len(found) == 1:
            return next(iter(found))
        if found:
            nodes = ", ".join(
                f"{name} (id {i})" if name else i for i, name in sorted(found.items())
            )
            raise BabblerError(f"{what!r} names more than one node: {nodes}; use its node id")
    raise BabblerError(
        f"no node {what!r} (a name, node id or node address, or an address of its links or"
        " cables: babblerctl nodes)"
    )


def find_node(s: Status, node_id: str) -> Node | None:
    """The other node with this node id in `status.nodes`, or None (this node, or unknown)."""
    return next((n for n in s.nodes if n.node_id == node_id), None)


def reachable_node(s: Status, what: str) -> Node:
    """Another node that `what` names and that has a route now. Raises BabblerError."""
    target = node_id(s, what)
    if target == s.node_id:
        raise BabblerError(f"{s.name or s.node_id} is this node")
    node = find_node(s, target)
    if node is None:  # in someone's info, not routed from here
        raise BabblerError(f"no route to {what} (babblerctl nodes)")
    if not node.reachable:
        raise BabblerError(f"{node.label} is not reachable now")
    return node


def ipv4_node_address(s: Status, node: Node | None = None) -> str:
    """This node's IPv4 node address, or `node`'s. Raises BabblerError saying why there is
    none."""
    if node is not None:
        if node.node_address_v4:
            return node.node_address_v4
        if node.name is None:
            raise BabblerError(f"{node.label} has not answered for its node info yet")
        raise BabblerError(f"{node.label} has no IPv4 node address (IPv4 off or refused there)")
    if s.node_address_v4:
        return s.node_address_v4
    if s.ipv4_prefix is None and s.ipv4_problem is None:
        raise BabblerError("IPv4 is off on this node (babblerd --ipv4-prefix off)")
    raise BabblerError(f"IPv4 refused: {s.ipv4_problem or 'no IPv4 node address yet'}")


def ip_lines(s: Status, node: Node | None, v4: bool, v6: bool, every: bool) -> list[str]:
    """`babblerctl ip`: this node's addresses, or `node`'s, a line each (escaped). The node
    address of each family asked (-4, -6; IPv6 alone when neither, both with `every`); with
    `every` also each link's IPv6 address and each cable's IPv4 one, of those families.
    Raises BabblerError when -4 asks for an IPv4 node address there is none of."""
    asked_v4 = v4
    if not v4 and not v6:
        v4, v6 = every, True
    label = "  node address" if every else ""
    lines = []
    if v6:
        lines.append(f"{node.node_address if node else s.node_address}{label}")
    if v4 and (asked_v4 or (node.node_address_v4 if node else s.node_address_v4)):
        lines.append(f"{ipv4_node_address(s, node)}{label}")  # -4 without one: why not
    if every and v6:
        whose = f"a link of {node.label}" if node else ""
        lines += [f"{a.address}  {a.interface or whose}" for a in link_addresses(s, node)]
    if every and v4:
        cables = node.cables if node else s.addresses_v4
        lines += [f"{c.address}  {c.interface} (cable to {c.peer})" for c in cables]
    return [escape(line) for line in lines]  # another node's come from its info


def ip_json(s: Status, node: Node | None) -> dict[str, Any]:
    """`babblerctl ip --json`: every address of this node or of `node`."""
    return {
        "node_id": node.node_id if node else s.node_id,
        "name": node.name if node else s.name,
        "node_address": node.node_address if node else s.node_address,
        "node_address_v4": node.node_address_v4 if node else s.node_address_v4,
        "addresses": [
            {"interface": a.interface or None, "address": a.address}
            for a in link_addresses(s, node)
        ],
        "cables": [
            {"interface": c.interface, "address": c.address, "peer": c.peer}
            for c in (node.cables if node else s.addresses_v4)
        ],
    }
