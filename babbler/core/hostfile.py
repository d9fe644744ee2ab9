"""What a job needs to run on the mesh (pure): MLX's ring and jaccl hostfiles, torch's
rendezvous lines and /etc/hosts lines (DESIGN.md "Names, hostfiles and the doctor").

Every output is a function of the cable graph alone, so every node of a mesh writes the same
file. Hosts are taken in node-id order (`--nodes` chooses which, never their order); the
ring backend takes them in the ring's order (core/ring.py). Refusals raise BabblerError,
one line naming what is missing.

MLX's ring (mlx/distributed/ring/ring.cpp): rank i listens on each of its own `ips` and
connects to each of rank i+1's, and refuses to run unless it has as many connections on the
left as on the right. So host i's `ips` are its own addresses on the cables to host i-1:
rank i-1 reaches them over those cables and no other, one connection per cable, and every
host lists as many as the narrowest step of the ring has cables.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from babbler.core import hostnames
from babbler.core.cablegraph import CableGraph, Host
from babbler.core.errors import BabblerError
from babbler.core.ring import EXACT, GaveUp, find_ring

FORMATS = ("mlx", "jaccl", "torch", "hosts")
TORCH_PORT = 29500  # torch's own default MASTER_PORT
LISTED = 8  # node pairs named in a refusal before "and N more"


@dataclass
class Hostfile:
    value: Any  # what to print: JSON for mlx and jaccl, lines for torch and hosts
    warnings: list[str] = field(default_factory=list)


def members(graph: CableGraph, chosen: Sequence[str] | None) -> tuple[list[Host], list[str]]:
    """The hosts of a job, in node-id order, and warnings. `chosen`: node ids (`--nodes`);
    None: this node and every node reachable now (others are named in a warning)."""
    warnings = []
    if chosen is None:
        hosts = [h for h in graph.hosts.values() if h.reachable]
        left = sorted(graph.label(h.node_id) for h in graph.hosts.values() if not h.reachable)
        if left:
            warnings.append(f"left out, not reachable or not answering: {', '.join(left)}")
    else:
        hosts = [graph.hosts[node_id] for node_id in dict.fromkeys(chosen)]
    for host in hosts:
        what = "this node" if host.me else graph.label(host.node_id)
        if not host.reachable:
            raise BabblerError(f"{what} is not reachable now (babblerctl nodes)")
        if host.name is None:
            raise BabblerError(f"{what} has not answered for its node info yet (babblerctl nodes)")
        if host.node_address_v4 is None:
            raise BabblerError(
                f"{what} has no IPv4 node address (IPv4 off or refused there: babblerctl status)"
            )
    if len(hosts) < 2:
        only = ", ".join(graph.label(h.node_id) for h in hosts)
        raise BabblerError(f"a job needs two nodes or more; only {only} (babblerctl nodes)")
    return sorted(hosts, key=lambda h: h.node_id), warnings


def ssh_names(graph: CableGraph, hosts: Iterable[Host], by_name: bool) -> dict[str, str]:
    """node id -> the `ssh` field: the IPv4 node address, or with `by_name` the name the
    hosts lines give it (install those first)."""
    if by_name:
        every = hostnames.names((h.node_id, h.name) for h in graph.hosts.values())
        return {h.node_id: every[h.node_id] for h in hosts}
    return {h.node_id: str(h.node_address_v4) for h in hosts}


def mlx(
    graph: CableGraph, chosen: Sequence[str] | None, allow_hops: bool, by_name: bool
) -> Hostfile:
    """MLX's launch hostfile for its ring backend: `[{"ssh", "ips"}, ...]` in ring order."""
    hosts, warnings = members(graph, chosen)
    ssh = ssh_names(graph, hosts, by_name)
    ids = [h.node_id for h in hosts]
    width = widths(graph, ids)
    try:
        found = find_ring(width)
        refusal = None if found else _no_ring(graph, ids, width)
    except GaveUp:
        found, refusal = None, f"no ring found through the cables of {len(ids)} nodes (the search"
        refusal += f" is exact up to {EXACT} nodes and gave up here)"
    if found is None:
        if not allow_hops:
            raise BabblerError(f"{refusal}; --allow-hops uses node addresses instead")
        warnings.append(f"{refusal}: the ring goes over node addresses, through other nodes")
        return Hostfile(
            [{"ssh": ssh[h.node_id], "ips": [h.node_address_v4]} for h in hosts], warnings
        )
    order, per_step = found
    ring = [ids[i] for i in order]
    out = []
    for i, node_id in enumerate(ring):
        previous = ring[i - 1]
        cables = graph.between(node_id, previous)[:per_step]
        ips = [str(c.end_on(node_id).address) for c in cables]
        out.append({"ssh": ssh[node_id], "ips": ips})
    return Hostfile(out, warnings)


def widths(graph: CableGraph, ids: list[str]) -> list[list[int]]:
    """How many cables join each two of `ids` (0 on the diagonal), in their order."""
    return [[len(graph.between(a, b)) if a != b else 0 for b in ids] for a in ids]


def _no_ring(graph: CableGraph, ids: list[str], width: list[list[int]]) -> str:
    """Why no ring: the nodes with fewer than two cabled partners, else the pairs not cabled."""
    n = len(ids)
    if n > 2:
        lonely = []
        for i, node_id in enumerate(ids):
            partners = [graph.label(ids[j]) for j in range(n) if width[i][j]]
            if len(partners) < 2:
                cabled = f"a cable to {partners[0]} only" if partners else "no cable to the others"
                lonely.append(f"{graph.label(node_id)} has {cabled}")
        if lonely:
            return "no ring through the cables: " + "; ".join(lonely)
    return "no ring through the cables; not cabled: " + _pairs(graph, ids, width)


def _pairs(graph: CableGraph, ids: list[str], width: list[list[int]]) -> str:
    missing = [
        f"{graph.label(ids[i])}-{graph.label(ids[j])}"
        for i in range(len(ids))
        for j in range(i + 1, len(ids))
        if not width[i][j]
    ]
    more = f" and {len(missing) - LISTED} more" if len(missing) > LISTED else ""
    return ", ".join(missing[:LISTED]) + more


def jaccl(graph: CableGraph, chosen: Sequence[str] | None, by_name: bool) -> Hostfile:
    """MLX's jaccl hostfile: a cable between every two hosts; host i's `rdma[j]` names its
    interface facing host j (its best cable), `ips` its IPv4 node address (the first host's
    is the coordinator)."""
    hosts, warnings = members(graph, chosen)
    ssh = ssh_names(graph, hosts, by_name)
    ids = [h.node_id for h in hosts]
    width = widths(graph, ids)
    if any(width[i][j] == 0 for i in range(len(ids)) for j in range(len(ids)) if i != j):
        raise BabblerError(
            "jaccl needs a cable between every two hosts; not cabled: " + _pairs(graph, ids, width)
        )
    out = []
    for host in hosts:
        rdma = [
            None
            if other == host.node_id
            else f"rdma_{graph.between(host.node_id, other)[0].end_on(host.node_id).interface}"
            for other in ids
        ]
        out.append({"ssh": ssh[host.node_id], "ips": [host.node_address_v4], "rdma": rdma})
    return Hostfile({"backend": "jaccl", "envs": [], "hosts": out}, warnings)


def torch(
    graph: CableGraph,
    chosen: Sequence[str] | None,
    port: int,
    this: bool,
    gloo_interface: str | None = None,
) -> Hostfile:
    """torch's rendezvous as shell lines (`eval "$(...)"`): MASTER_ADDR is the first host's
    IPv4 node address; each host's rank in a comment; with `this`, NODE_RANK of this node and
    the interface name gloo binds to reach the node address (Linux: its label)."""
    hosts, warnings = members(graph, chosen)
    lines = [
        f"MASTER_ADDR={hosts[0].node_address_v4}",
        f"MASTER_PORT={port}",
        f"WORLD_SIZE={len(hosts)}",
    ]
    names = hostnames.names((h.node_id, h.name) for h in graph.hosts.values())
    lines += [
        f"# rank {rank}: {names[h.node_id]} {h.node_address_v4}" for rank, h in enumerate(hosts)
    ]
    if this:
        rank = next((r for r, h in enumerate(hosts) if h.me), None)
        if rank is None:
            raise BabblerError("--this: this node is not one of --nodes")
        lines.append(f"NODE_RANK={rank}")
        if gloo_interface is not None:
            lines.append(f"GLOO_SOCKET_IFNAME={gloo_interface}")
    return Hostfile(lines, warnings)


def hosts_lines(graph: CableGraph, taken: Iterable[str]) -> Hostfile:
    """/etc/hosts lines for every node known: its IPv4 (when it has one) and IPv6 node
    addresses and the name hostnames.py allows (`taken`: the names this host has)."""
    names = hostnames.names(((h.node_id, h.name) for h in graph.hosts.values()), taken)
    lines = ["# babbler mesh nodes (babblerctl hostfile --format hosts)"]
    for host in sorted(graph.hosts.values(), key=lambda h: h.node_id):
        if host.node_address_v4 is not None:
            lines.append(f"{host.node_address_v4}\t{names[host.node_id]}")
        lines.append(f"{host.node_address}\t{names[host.node_id]}")
    return Hostfile(lines)
