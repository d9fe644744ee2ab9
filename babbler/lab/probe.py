"""Looking at a running lab: each node's status, pings, and waiting for the mesh to form."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from ipaddress import IPv6Network
from typing import Any, TypeVar

from babbler.client import ask
from babbler.core.addressing import node_range
from babbler.core.table import INFINITY, is_usable
from babbler.lab import wait
from babbler.lab.node import Node
from babbler.lab.topology import LabError

POLL = 0.05
T = TypeVar("T")


def running(nodes: Sequence[Node]) -> list[Node]:
    return [n for n in nodes if n.pid is not None]


def exec_in(node: Node, *cmd: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ip", "netns", "exec", node.netns, *cmd],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def ping(source: Node, address: str, wait: float = 1) -> bool:
    result = exec_in(source, "ping", "-c", "1", "-W", f"{wait:g}", address)  # either family
    return result.returncode == 0


def _within(prefix: str, network: IPv6Network) -> bool:
    try:
        return bool(IPv6Network(prefix, strict=False).subnet_of(network))
    except ValueError:
        return False


def routes_complete(nodes: Sequence[Node]) -> bool:
    """Every running node has a usable route into every other running node's range."""
    states = {n.index: ask(n.socket, "status") for n in running(nodes)}
    ranges = {i: node_range(int(s["node_id"], 16)) for i, s in states.items()}
    for i, s in states.items():
        usable = [r["prefix"] for r in s["routes"] if is_usable(r)]
        for j, other in ranges.items():
            if j != i and not any(_within(p, other) for p in usable):
                return False
    return True


def addresses(nodes: Sequence[Node]) -> dict[int, str]:
    """Node index -> its first mesh address (running nodes that have one)."""
    out = {}
    for node in running(nodes):
        found = ask(node.socket, "status")["addresses"]
        if found:
            out[node.index] = found[0]["address"]
    return out


def from_each(nodes: Sequence[Node], work: Callable[[Node], T]) -> list[T]:
    """`work` for every node at once, one thread each (each mostly waits on a process)."""
    with ThreadPoolExecutor(max_workers=max(1, len(nodes))) as pool:
        return list(pool.map(work, nodes))


def unanswered(
    sources: Sequence[Node], targets: Mapping[int, str], wait: float = 1.0
) -> list[tuple[int, int]]:
    """Pairs (source index, target index) where one ping from the source to the target's
    address got no answer within `wait` seconds. Every source pings at once, each through
    one shell in its namespace (not one process per pair)."""

    def failures(source: Node) -> list[tuple[int, int]]:
        script = " ".join(
            f"ping -c1 -W{wait:g} {address} >/dev/null 2>&1 || echo {index};"
            for index, address in targets.items()
            if index != source.index
        )
        if not script:
            return []
        out = exec_in(source, "sh", "-c", script).stdout
        return [(source.index, int(index)) for index in out.split()]

    return [pair for pairs in from_each(sources, failures) for pair in pairs]


def all_pairs_ping(nodes: Sequence[Node]) -> list[tuple[int, int]]:
    """Pairs (from, to) that do not answer a ping; empty when the mesh is complete."""
    return unanswered(running(nodes), addresses(nodes))


def settled(state: dict[str, Any]) -> bool:
    """For every prefix, the installed route is the cheapest the node knows."""
    best: dict[str, int] = {}
    chosen: dict[str, int] = {}
    for r in state["routes"]:
        if r["metric"] is None or r["metric"] >= INFINITY:
            continue
        best[r["prefix"]] = min(best.get(r["prefix"], r["metric"]), r["metric"])
        if r["installed"]:
            chosen[r["prefix"]] = r["metric"]
    return chosen == best


def wait_settled(node: Node, timeout: float = 15.0) -> bool:
    """Wait until the node's installed routes are the cheapest it knows. Pings work before
    that: babeld moves to a better route gradually. Returns whether it settled in time."""
    return wait.until(lambda: settled(ask(node.socket, "status")), timeout, every=0.1)


def wait_reachable(nodes: Sequence[Node], timeout: float) -> float:
    """Wait until every node has routes to and pings every other; seconds it took."""
    start = time.monotonic()

    def reachable() -> bool:
        return (
            len(addresses(nodes)) == len(running(nodes))
            and routes_complete(nodes)
            and not all_pairs_ping(nodes)
        )

    if not wait.until(reachable, timeout, every=POLL):
        raise LabError(f"mesh not fully reachable within {timeout:g} s")
    return time.monotonic() - start
