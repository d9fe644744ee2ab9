"""What a job needs to run on the mesh (pure): the hosts of a job and their checks, torch's
rendezvous lines and /etc/hosts lines (DESIGN.md "Names, hostfiles and the doctor"); MLX's
files are core/mlxfile.py, the variables other frameworks read core/jobenv.py.

Every output is a function of the cable graph alone, so every node of a mesh writes the same
file (those for "this node" aside). Hosts are taken in node-id order (`--nodes` chooses
which, never their order); MLX's ring backends take them in the ring's order (core/ring.py).
Refusals raise BabblerError, one line naming what is missing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from babbler.core import hostnames
from babbler.core.cablegraph import CableGraph, Host
from babbler.core.errors import BabblerError

TORCH_PORT = 29500  # torch's own default MASTER_PORT
LISTED = 8  # node pairs named in a refusal before "and N more"


@dataclass
class Hostfile:
    value: Any  # what to print: JSON for MLX's, lines for the others
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # not warnings: what was chosen and why


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
    check(graph, hosts)
    return sorted(hosts, key=lambda h: h.node_id), warnings


def check(graph: CableGraph, hosts: list[Host]) -> None:
    """Each host reachable, answered, with an IPv4 node address; two of them at least."""
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


def ssh_names(graph: CableGraph, hosts: Iterable[Host], by_name: bool) -> dict[str, str]:
    """node id -> the `ssh` field: the IPv4 node address, or with `by_name` the name the
    hosts lines give it (install those first)."""
    if by_name:
        every = hostnames.names((h.node_id, h.name) for h in graph.hosts.values())
        return {h.node_id: every[h.node_id] for h in hosts}
    return {h.node_id: str(h.node_address_v4) for h in hosts}


def widths(graph: CableGraph, ids: list[str]) -> list[list[int]]:
    """How many cables join each two of `ids` (0 on the diagonal), in their order."""
    return [[len(graph.between(a, b)) if a != b else 0 for b in ids] for a in ids]


def pairs(graph: CableGraph, ids: list[str], width: list[list[int]]) -> str:
    """The pairs of `ids` no cable joins, the first LISTED of them."""
    missing = [
        f"{graph.label(ids[i])}-{graph.label(ids[j])}"
        for i in range(len(ids))
        for j in range(i + 1, len(ids))
        if not width[i][j]
    ]
    more = f" and {len(missing) - LISTED} more" if len(missing) > LISTED else ""
    return ", ".join(missing[:LISTED]) + more


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


def hosts_lines(
    graph: CableGraph, taken: Iterable[str], chosen: Sequence[str] | None = None
) -> Hostfile:
    """/etc/hosts lines for every node known, or for the `chosen` node ids: its IPv4 (when it
    has one) and IPv6 node addresses and the name hostnames.py allows (`taken`: the names
    this host has). Names are given knowing every node, so a subset writes the same names."""
    names = hostnames.names(((h.node_id, h.name) for h in graph.hosts.values()), taken)
    lines = ["# babbler mesh nodes (babblerctl hostfile --format hosts)"]
    wanted = graph.hosts.values() if chosen is None else [graph.hosts[i] for i in set(chosen)]
    for host in sorted(wanted, key=lambda h: h.node_id):
        if host.node_address_v4 is not None:
            lines.append(f"{host.node_address_v4}\t{names[host.node_id]}")
        lines.append(f"{host.node_address}\t{names[host.node_id]}")
    return Hostfile(lines)
