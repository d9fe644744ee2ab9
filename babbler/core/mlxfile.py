"""MLX's hostfiles from the cable graph (pure): every backend `mlx.launch` reads and the
choice `mlx.distributed_config` makes (mlx python/mlx/_distributed_utils/: common.py reads
the file, launch.py checks it, config.py writes it and chooses the backend).

Two shapes: the bare list `[{"ssh", "ips"}, ...]` (the ring backend's old form, what
`--format mlx` writes without `--backend`) and the current schema `{"backend", "envs",
"hosts": [{"ssh", "ips", "rdma"?}]}`. mlx.launch reads both.

MLX's ring (mlx/distributed/ring/ring.cpp): rank i listens on each of its own `ips` and
connects to each of rank i+1's, and refuses to run unless it has as many connections on the
left as on the right. So host i's `ips` are its own addresses on the cables to host i-1:
rank i-1 reaches them over those cables and no other, one connection per cable, and every
host lists as many as the narrowest step of the ring has cables.

jaccl: host i's `rdma[j]` is its RDMA device facing host j (`rdma_<interface>`), null for
itself; `ips` the node address, and `hosts[0].ips[0]` the coordinator. jaccl-ring (launch.py:
MLX_JACCL_RING) needs a device only towards the two ring neighbours, the others null; a
neighbour's entry is a list when several cables join the pair (config.py's
configure_jaccl_ring), as many as the ring's narrowest step has.

Refusals name the cause first: the cables (no ring, no full mesh) before the nodes left out,
and a node named in `--nodes` that is cut off counts as one without cables.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from babbler.core.cablegraph import CableGraph, Host
from babbler.core.errors import BabblerError
from babbler.core.hostfile import Hostfile, check, pairs, ssh_names, widths
from babbler.core.ring import EXACT, GaveUp, find_ring

BACKENDS = ("ring", "jaccl", "jaccl-ring", "auto")


@dataclass
class Job:
    """The hosts of an MLX job in node-id order, the cables between them (a cut-off host has
    none), why some have none, and the hosts left out."""

    hosts: list[Host]
    width: list[list[int]]
    why: dict[str, str]  # node id -> why it has no cables now (cut off)
    left_out: list[str]  # labels of the reachable-only default's absentees

    @property
    def ids(self) -> list[str]:
        return [h.node_id for h in self.hosts]

    def full_mesh(self) -> bool:
        n = len(self.hosts)
        return all(self.width[i][j] for i in range(n) for j in range(n) if i != j)


def job(graph: CableGraph, chosen: Sequence[str] | None) -> Job:
    if chosen is None:
        hosts = [h for h in graph.hosts.values() if h.reachable]
        left = sorted(graph.label(h.node_id) for h in graph.hosts.values() if not h.reachable)
    else:
        hosts, left = [graph.hosts[node_id] for node_id in dict.fromkeys(chosen)], []
    hosts.sort(key=lambda h: h.node_id)
    why = {h.node_id: "not reachable now" for h in hosts if not h.reachable}
    width = widths(graph, [h.node_id for h in hosts])
    for i, host in enumerate(hosts):  # a cut-off node's cables are from its last info
        if host.node_id in why:
            for j in range(len(hosts)):
                width[i][j] = width[j][i] = 0
    return Job(hosts, width, why, left)


def refuse(found: Job, cause: str) -> BabblerError:
    if found.left_out:
        cause += f" (left out, not reachable: {', '.join(found.left_out)})"
    return BabblerError(cause)


def _checked(graph: CableGraph, found: Job) -> list[str]:
    """The per-host checks once the cables are known to carry the job; the warnings."""
    check(graph, found.hosts)
    if found.left_out:
        return [f"left out, not reachable or not answering: {', '.join(found.left_out)}"]
    return []


def _ring(graph: CableGraph, found: Job) -> tuple[tuple[list[int], int] | None, str | None]:
    """The ring (order, cables per step) or why there is none."""
    if len(found.hosts) < 2:
        return None, None
    try:
        ring = find_ring(found.width)
    except GaveUp:
        return None, (
            f"no ring found through the cables of {len(found.hosts)} nodes (the search is"
            f" exact up to {EXACT} nodes and gave up here)"
        )
    return ring, None if ring else _no_ring(graph, found)


def _no_ring(graph: CableGraph, found: Job) -> str:
    """Why no ring: the nodes with fewer than two cabled partners, else the pairs not cabled."""
    ids, width, n = found.ids, found.width, len(found.hosts)
    if n > 2:
        lonely = []
        for i, node_id in enumerate(ids):
            partners = [graph.label(ids[j]) for j in range(n) if width[i][j]]
            if len(partners) < 2:
                cabled = f"a cable to {partners[0]} only" if partners else "no cable to the others"
                because = f" ({found.why[node_id]})" if node_id in found.why else ""
                lonely.append(f"{graph.label(node_id)} has {cabled}{because}")
        if lonely:
            return "no ring through the cables: " + "; ".join(lonely)
    cut = [f"{graph.label(node_id)} {why}" for node_id, why in found.why.items()]
    because = f" ({'; '.join(cut)})" if cut else ""
    return "no ring through the cables; not cabled: " + pairs(graph, ids, width) + because


def _too_few(graph: CableGraph, found: Job) -> None:
    """The checks before the cables: the reachable hosts answered with an IPv4 node address
    (a cut-off host is one without cables: the cause comes first), two hosts at least."""
    reachable = [h for h in found.hosts if h.reachable]
    if len(reachable) >= 2:
        check(graph, reachable)
    if len(found.hosts) < 2:
        only = ", ".join(graph.label(h.node_id) for h in found.hosts)
        raise refuse(found, f"a job needs two nodes or more; only {only} (babblerctl nodes)")


def mlx(
    graph: CableGraph, chosen: Sequence[str] | None, allow_hops: bool, by_name: bool
) -> Hostfile:
    """MLX's ring hostfile, the bare list: `[{"ssh", "ips"}, ...]` in ring order."""
    found = job(graph, chosen)
    _too_few(graph, found)
    ring, refusal = _ring(graph, found)
    if ring is None:
        if not allow_hops:
            raise refuse(found, f"{refusal}; --allow-hops uses node addresses instead")
        warnings = _checked(graph, found)
        warnings.append(f"{refusal}: the ring goes over node addresses, through other nodes")
        ssh = ssh_names(graph, found.hosts, by_name)
        hosts = [{"ssh": ssh[h.node_id], "ips": [h.node_address_v4]} for h in found.hosts]
        return Hostfile(hosts, warnings)
    warnings = _checked(graph, found)
    ssh = ssh_names(graph, found.hosts, by_name)
    order, per_step = ring
    in_ring = [found.ids[i] for i in order]
    out = []
    for i, node_id in enumerate(in_ring):
        cables = graph.between(node_id, in_ring[i - 1])[:per_step]
        out.append({"ssh": ssh[node_id], "ips": [str(c.end_on(node_id).address) for c in cables]})
    return Hostfile(out, warnings)


def _schema(backend: str, hosts: list[dict[str, Any]]) -> dict[str, Any]:
    return {"backend": backend, "envs": [], "hosts": hosts}


def ring(
    graph: CableGraph, chosen: Sequence[str] | None, allow_hops: bool, by_name: bool
) -> Hostfile:
    """`--backend ring`: the ring hostfile in the current schema."""
    made = mlx(graph, chosen, allow_hops, by_name)
    made.value = _schema("ring", made.value)
    return made


def _device(graph: CableGraph, node_id: str, other: str, count: int) -> str | list[str]:
    cables = graph.between(node_id, other)[:count]
    devices = [f"rdma_{c.end_on(node_id).interface}" for c in cables]
    return devices[0] if count == 1 else devices


def _not_ready(graph: CableGraph, hosts: list[Host]) -> list[str]:
    """A warning for the hosts not ready for RDMA, and one for those whose readiness is not
    known (a Linux node, or an older babblerd): jaccl will not run there either way."""
    out = []
    off = [graph.label(h.node_id) for h in hosts if h.rdma_ready is False]
    if off:
        out.append(
            f"not ready for RDMA: {', '.join(off)} (babblerctl doctor says what to run there)"
        )
    unknown = [graph.label(h.node_id) for h in hosts if h.rdma_ready is None]
    if unknown:
        out.append(
            f"RDMA readiness unknown (not a Mac, or not read yet): {', '.join(unknown)}"
            " (jaccl runs only between Macs ready for RDMA)"
        )
    return out


def jaccl(graph: CableGraph, chosen: Sequence[str] | None, by_name: bool) -> Hostfile:
    """jaccl: a cable between every two hosts; host i's `rdma[j]` its device facing host j
    (the best cable), `ips` its IPv4 node address; hosts in node-id order."""
    found = job(graph, chosen)
    _too_few(graph, found)
    if not found.full_mesh():
        cause = "jaccl needs a cable between every two hosts; not cabled: "
        raise refuse(found, cause + pairs(graph, found.ids, found.width))
    warnings = _checked(graph, found) + _not_ready(graph, found.hosts)
    ssh = ssh_names(graph, found.hosts, by_name)
    out = []
    for host in found.hosts:
        rdma = [
            None if other == host.node_id else _device(graph, host.node_id, other, 1)
            for other in found.ids
        ]
        out.append({"ssh": ssh[host.node_id], "ips": [host.node_address_v4], "rdma": rdma})
    return Hostfile(_schema("jaccl", out), warnings)


def jaccl_ring(graph: CableGraph, chosen: Sequence[str] | None, by_name: bool) -> Hostfile:
    """jaccl-ring: hosts in ring order, a device (or one per parallel cable) towards each of
    the two neighbours, null elsewhere; the first host's node address is the coordinator."""
    found = job(graph, chosen)
    _too_few(graph, found)
    ring, refusal = _ring(graph, found)
    if ring is None:
        raise refuse(found, f"{refusal}; jaccl-ring needs one (no hops over RDMA)")
    warnings = _checked(graph, found) + _not_ready(graph, found.hosts)
    ssh = ssh_names(graph, found.hosts, by_name)
    order, per_step = ring
    in_ring = [found.hosts[i] for i in order]
    n = len(in_ring)
    out = []
    for i, host in enumerate(in_ring):
        neighbours = {in_ring[i - 1].node_id, in_ring[(i + 1) % n].node_id}
        rdma = [
            _device(graph, host.node_id, other.node_id, per_step)
            if other.node_id in neighbours
            else None
            for other in in_ring
        ]
        out.append({"ssh": ssh[host.node_id], "ips": [host.node_address_v4], "rdma": rdma})
    return Hostfile(_schema("jaccl-ring", out), warnings)


def auto(
    graph: CableGraph, chosen: Sequence[str] | None, allow_hops: bool, by_name: bool
) -> Hostfile:
    """As `mlx.distributed_config` chooses (config.py prepare_tb_hostfile): every host ready
    for RDMA and a full mesh: jaccl; ready and a ring: jaccl-ring; else ring. The choice and
    why go to `notes`."""
    found = job(graph, chosen)
    _too_few(graph, found)
    not_ready = [graph.label(h.node_id) for h in found.hosts if h.rdma_ready is False]
    unknown = [graph.label(h.node_id) for h in found.hosts if h.rdma_ready is None]
    if not_ready or unknown:
        why = "; ".join(
            [f"not ready for RDMA: {', '.join(not_ready)}"] * bool(not_ready)
            + [f"RDMA readiness unknown (not a Mac, or not read yet): {', '.join(unknown)}"]
            * bool(unknown)
        )
        made = ring(graph, chosen, allow_hops, by_name)
        made.notes.append(f"backend ring: {why}")
        return made
    if found.full_mesh():
        made = jaccl(graph, chosen, by_name)
        made.notes.append("backend jaccl: every host is ready for RDMA and cabled to every other")
        return made
    missing = pairs(graph, found.ids, found.width)
    ring_found, _ = _ring(graph, found)
    if ring_found is not None:
        made = jaccl_ring(graph, chosen, by_name)
        made.notes.append(
            f"backend jaccl-ring: every host is ready for RDMA; the cables make a ring but not"
            f" a full mesh (not cabled: {missing})"
        )
        return made
    made = ring(graph, chosen, allow_hops, by_name)  # refuses, or goes over node addresses
    made.notes.append("backend ring: every host is ready for RDMA but the cables make no ring")
    return made


def by_backend(
    backend: str | None,
    graph: CableGraph,
    chosen: Sequence[str] | None,
    allow_hops: bool,
    by_name: bool,
) -> Hostfile:
    """`--format mlx [--backend B]`."""
    if backend is None:
        return mlx(graph, chosen, allow_hops, by_name)
    if backend == "ring":
        return ring(graph, chosen, allow_hops, by_name)
    if backend == "jaccl":
        return jaccl(graph, chosen, by_name)
    if backend == "jaccl-ring":
        return jaccl_ring(graph, chosen, by_name)
    return auto(graph, chosen, allow_hops, by_name)
