"""`babblerctl doctor`'s RDMA over Thunderbolt checks (pure): for each Mac of the mesh, this
one and every other that answers, whether MLX's jaccl backend can run there, and if not,
what to run on that Mac; then whether a jaccl hostfile over the Macs would be valid.

Read from `status` alone (`status.rdma` and each node's `rdma`, from its node info: core/
rdma.py says what they hold), so one doctor on any node names the Mac that is not ready.
A mesh without Macs gets no line.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from babbler.core import rdma
from babbler.core.cablegraph import CableGraph

OK, WARN = "ok", "warn"  # ui/doctor.py's: a Mac not ready is no failure of the mesh


class Line(NamedTuple):
    """One of the doctor's checks (ui/doctor.py `Check`, which it becomes)."""

    check: str
    status: str
    saw: str
    do: str = ""


def _macs(status: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(node id, its rdma) of every Mac that says: this one first, then the reachable."""
    out = []
    if isinstance(status.get("rdma"), dict):
        out.append((str(status["node_id"]), status["rdma"]))
    for node in status.get("nodes") or []:
        if isinstance(node, dict) and node.get("reachable") and isinstance(node.get("rdma"), dict):
            out.append((str(node["node_id"]), node["rdma"]))
    return out


def _facing(graph: CableGraph, node_id: str) -> dict[str, str]:
    """The node's cable interfaces -> the node at each one's far end (its label)."""
    out = {}
    for cables in graph.cables.values():
        for cable in cables:
            if node_id in (cable.near.node_id, cable.far.node_id):
                out[cable.end_on(node_id).interface] = graph.label(
                    cable.end_facing(node_id).node_id
                )
    return out


def _cables(value: dict[str, Any], facing: dict[str, str]) -> str:
    said = []
    for cable in value.get("cables") or []:
        speed = cable.get("speed_gbps")
        to = f" to {facing[cable['interface']]}" if cable["interface"] in facing else ""
        rate = f" {speed:g} Gb/s" if isinstance(speed, int | float) else ""
        said.append(f"{cable['interface']}{to}{rate} {cable.get('device') or 'no device'}")
    return ", ".join(said) or "no Thunderbolt cable"


def macs(status: Mapping[str, Any]) -> Iterable[Line]:
    """A line per Mac: ready for jaccl, or what is wrong and what to run there."""
    graph = CableGraph.from_status(status)
    for node_id, value in _macs(status):
        name = graph.label(node_id)
        where = "this Mac" if node_id == status.get("node_id") else name
        version = value.get("macos") or "?"
        cables = _cables(value, _facing(graph, node_id))
        found = rdma.problems(value)
        if not found:
            saw = f"{name} ready for jaccl: macOS {version}, rdma_ctl enabled, {cables}"
            yield Line(f"rdma {name}", OK, saw)
            continue
        todo: list[str] = []
        for problem in found:
            if problem.do not in todo:
                todo.append(problem.do)
        yield Line(
            f"rdma {name}",
            WARN,
            f"{name} not ready for jaccl: {'; '.join(p.what for p in found)} ({cables})",
            f"on {where}: {'; '.join(todo)}",
        )


def jaccl(status: Mapping[str, Any]) -> Iterable[Line]:
    """Whether `babblerctl hostfile --format jaccl` over the Macs would make a hostfile jaccl
    runs with: two Macs or more, a cable between every two, every Mac ready, and on each
    cable the device each end's `rdma` entry names."""
    found = _macs(status)
    if len(found) < 2:
        return
    graph = CableGraph.from_status(status)
    ids = [node_id for node_id, _ in found]
    devices = {node_id: set(value.get("devices") or []) for node_id, value in found}
    wrong = [
        f"{graph.label(node_id)} not ready" for node_id, value in found if rdma.problems(value)
    ]
    for i, a in enumerate(ids):
        for b in ids[i + 1 :]:
            cables = graph.between(a, b)
            if not cables:
                wrong.append(f"no cable between {graph.label(a)} and {graph.label(b)}")
                continue
            for end in (cables[0].end_on(a), cables[0].end_on(b)):
                if f"rdma_{end.interface}" not in devices[end.node_id]:
                    label = graph.label(end.node_id)
                    wrong.append(f"{label} has no rdma_{end.interface}")
    names = ", ".join(graph.label(node_id) for node_id in ids)
    if wrong:
        yield Line(
            "jaccl",
            WARN,
            f"a jaccl hostfile over {names} would not run: {'; '.join(wrong)}",
            "make every Mac ready (the rdma lines) and cable every two of them; until then "
            "babblerctl hostfile --format mlx (ring) runs over these cables",
        )
    else:
        yield Line("jaccl", OK, f"a jaccl hostfile over {names} would be valid")
