"""`babbler-lab`: a mesh of N nodes in network namespaces, each running babblerd with real
babeld, wired by veth pairs. The demo and the integration tests use the same `Lab` class.

Everything a lab creates is named after it (namespaces `bbl-<lab>-n<i>`, files under
`/tmp/babbler-lab/<lab>`) and recorded in `lab.json`, so that `down` removes exactly that:
processes are ended by their recorded pid, never by name.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from ipaddress import IPv6Network
from pathlib import Path
from typing import Any

from babbler.addressing import node_range
from babbler.babeld.process import process_name
from babbler.client import NotRunning, status
from babbler.errors import BabblerError
from babbler.state import INFINITY, is_usable

LAB_ROOT = Path("/tmp/babbler-lab")
TOPOLOGIES = ("line", "ring", "star")
# The lab's links are virtual: name them explicitly (babblerd skips virtual links by default).
LINK_GLOB = "v*"
STOP_TIMEOUT = 5.0
# Daemons started by this process, by pid, so that their exit status can be read.
_children: dict[int, subprocess.Popen[bytes]] = {}


class LabError(BabblerError):
    pass


def edges(nodes: int, topology: str) -> list[tuple[int, int]]:
    """Node pairs (1-based) that get a link."""
    if topology == "line":
        return [(i, i + 1) for i in range(1, nodes)]
    if topology == "ring":
        pairs = [(i, i + 1) for i in range(1, nodes)]
        return [*pairs, (nodes, 1)] if nodes > 2 else pairs
    if topology == "star":
        return [(1, i) for i in range(2, nodes + 1)]
    raise LabError(f"unknown topology {topology!r} (one of {', '.join(TOPOLOGIES)})")


def link_name(here: int, there: int) -> str:
    return f"v{here}x{there}"


def _run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(args, capture_output=True, text=True, check=False)
    if check and result.returncode != 0:
        raise LabError(f"{' '.join(args)}: {result.stderr.strip() or result.returncode}")
    return result


def _alive(pid: int, marker: str) -> bool:
    """The process is alive (not a zombie) and its command line contains `marker`: it is
    still the one we started, not a later process that got its pid."""
    if process_name(pid) is None:
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return False
    return marker in cmdline


def _end(pid: int, marker: str, timeout: float = STOP_TIMEOUT) -> None:
    """SIGTERM the process if it is still the one we started, then SIGKILL after `timeout`."""
    if not _alive(pid, marker):
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid, marker):
            return
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)


@dataclass
class Node:
    index: int
    netns: str
    base: str
    pid: int | None = None

    @property
    def name(self) -> str:
        return f"n{self.index}"

    @property
    def run_dir(self) -> Path:
        return Path(self.base) / "run"

    @property
    def state_dir(self) -> Path:
        return Path(self.base) / "state"

    @property
    def socket(self) -> Path:
        return self.run_dir / "babblerd.sock"

    @property
    def log(self) -> Path:
        return Path(self.base) / "babblerd.log"


@dataclass
class Lab:
    name: str
    topology: str
    nodes: list[Node] = field(default_factory=list)
    links: list[tuple[int, int]] = field(default_factory=list)
    daemon_args: list[str] = field(default_factory=list)

    @property
    def base(self) -> Path:
        return LAB_ROOT / self.name

    def save(self) -> None:
        self.base.mkdir(parents=True, exist_ok=True)
        (self.base / "lab.json").write_text(json.dumps(asdict(self), indent=1))

    @classmethod
    def load(cls, name: str) -> Lab:
        try:
            data = json.loads((LAB_ROOT / name / "lab.json").read_text())
        except FileNotFoundError:
            raise LabError(f"no lab named {name!r} is up (no {LAB_ROOT / name}/lab.json)") from None
        data["nodes"] = [Node(**n) for n in data["nodes"]]
        data["links"] = [tuple(pair) for pair in data["links"]]
        return cls(**data)

    def node(self, name: str) -> Node:
        for node in self.nodes:
            if name in (node.name, str(node.index), node.netns):
                return node
        raise LabError(f"no node {name!r} in lab {self.name} (nodes: n1..n{len(self.nodes)})")

    # -- building ------------------------------------------------------------------------------

    @classmethod
    def create(cls, name: str, nodes: int, topology: str, daemon_args: list[str]) -> Lab:
        """Namespaces and links only; `start` runs the daemons. Cleans up after itself on error."""
        if not re.fullmatch(r"[A-Za-z0-9_]{1,24}", name):
            raise LabError(f"lab name must be 1-24 letters, digits or _, got {name!r}")
        if not 1 <= nodes <= 64:
            raise LabError("--nodes must be between 1 and 64")
        if (LAB_ROOT / name / "lab.json").exists():
            raise LabError(f"lab {name!r} is already up; run `babbler-lab --name {name} down`")
        lab = cls(name, topology, links=edges(nodes, topology), daemon_args=daemon_args)
        try:
            for i in range(1, nodes + 1):
                node = Node(i, f"bbl-{name}-n{i}", str(lab.base / f"n{i}"))
                _run("ip", "netns", "add", node.netns)
                lab.nodes.append(node)
                lab.save()
                _run("ip", "-n", node.netns, "link", "set", "lo", "up")
                # Virtual links come up at once; skip duplicate address detection so the
                # link-local is usable at once too (real links pay ~1 s of DAD here).
                _run(
                    "ip",
                    "netns",
                    "exec",
                    node.netns,
                    "sysctl",
                    "-qw",
                    "net.ipv6.conf.default.accept_dad=0",
                    "net.ipv6.conf.all.accept_dad=0",
                )
            for a, b in lab.links:
                lab.add_link(a, b)
        except BaseException:
            lab.down()
            raise
        return lab

    def add_link(self, a: int, b: int) -> None:
        na, nb = self.nodes[a - 1], self.nodes[b - 1]
        _run(
            "ip",
            "link",
            "add",
            link_name(a, b),
            "netns",
            na.netns,
            "type",
            "veth",
            "peer",
            "name",
            link_name(b, a),
            "netns",
            nb.netns,
        )
        _run("ip", "-n", na.netns, "link", "set", link_name(a, b), "up")
        _run("ip", "-n", nb.netns, "link", "set", link_name(b, a), "up")

    def start(self, node: Node, extra: list[str] | None = None, prefix: Sequence[str] = ()) -> None:
        """Start babblerd in the node's namespace and wait until its socket answers.
        `prefix` runs it through another program, e.g. setpriv to drop privileges."""
        self.spawn(node, extra, prefix)
        self.wait_served(node)

    def spawn(self, node: Node, extra: list[str] | None = None, prefix: Sequence[str] = ()) -> None:
        """Start babblerd in the node's namespace without waiting for it (see `start`)."""
        node.run_dir.mkdir(parents=True, exist_ok=True)
        args = [
            "ip",
            "netns",
            "exec",
            node.netns,
            *prefix,
            sys.executable,
            "-m",
            "babbler.cli",
            "--run-dir",
            str(node.run_dir),
            "--state-dir",
            str(node.state_dir),
            "--interface",
            LINK_GLOB,
            "--log-format",
            "json",
            *self.daemon_args,
            *(extra or []),
        ]
        with node.log.open("ab") as log:
            process = subprocess.Popen(
                args, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True
            )
        node.pid = process.pid
        _children[process.pid] = process
        self.save()

    def exited(self, node: Node) -> int | None:
        """The exit status of a daemon this process started, or None while it runs."""
        process = _children.get(node.pid or -1)
        if process is None:
            raise LabError(f"{node.name}: not started by this process")
        return process.poll()

    def wait_served(self, node: Node) -> None:
        """Wait until a daemon started with `spawn` answers on its socket (15 s at most)."""
        process = _children[node.pid or -1]
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise LabError(
                    f"babblerd on {node.name} exited with {process.returncode}; see {node.log}"
                )
            try:
                status(node.socket, timeout=2)
                return
            except (NotRunning, OSError):
                time.sleep(0.02)
        raise LabError(f"babblerd on {node.name} did not serve {node.socket} within 15 s")

    def start_all(self) -> None:
        """Start every node at once (as machines powered on together would)."""
        for node in self.nodes:
            self.spawn(node)
        for node in self.nodes:
            self.wait_served(node)

    def wait_exit(self, node: Node, timeout: float = STOP_TIMEOUT) -> int:
        """The exit status of a daemon this process started. Raises LabError on timeout."""
        process = _children.get(node.pid or -1)
        if process is None:
            raise LabError(f"{node.name}: not started by this process")
        try:
            return process.wait(timeout)
        except subprocess.TimeoutExpired:
            raise LabError(f"babblerd on {node.name} still running after {timeout:g} s") from None

    def down(self) -> None:
        """Stop every daemon we started, any babeld they left, delete namespaces and files."""
        for node in self.nodes:
            if node.pid is not None:
                _end(node.pid, "babbler.cli")
            try:
                babeld = int((node.run_dir / "private" / "babeld.pid").read_text())
                _end(babeld, "babeld")
            except (OSError, ValueError):
                pass
        existing = _run("ip", "netns", "list", check=False).stdout.split()
        for node in self.nodes:
            if node.netns in existing:
                _run("ip", "netns", "del", node.netns, check=False)
        shutil.rmtree(self.base, ignore_errors=True)

    # -- looking -------------------------------------------------------------------------------

    def status(self, node: Node) -> dict[str, Any]:
        return status(node.socket)

    def exec(self, node: Node, *cmd: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["ip", "netns", "exec", node.netns, *cmd],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def ping(self, source: Node, address: str, wait: float = 1) -> bool:
        result = self.exec(source, "ping", "-6", "-c", "1", "-W", f"{wait:g}", address)
        return result.returncode == 0

    def routes_complete(self) -> bool:
        """Every node has a usable route into every other running node's range."""
        states = {n.index: self.status(n) for n in self.nodes if n.pid is not None}
        ranges = {i: node_range(int(s["node_id"], 16)) for i, s in states.items()}
        for i, s in states.items():
            usable = [r["prefix"] for r in s["routes"] if is_usable(r)]
            for j, other in ranges.items():
                if j != i and not any(_within(p, other) for p in usable):
                    return False
        return True

    def addresses(self) -> dict[int, str]:
        """Node index -> its first mesh address (running nodes that have one)."""
        out = {}
        for node in self.nodes:
            if node.pid is not None:
                addresses = self.status(node)["addresses"]
                if addresses:
                    out[node.index] = addresses[0]["address"]
        return out

    def all_pairs_ping(self) -> list[tuple[int, int]]:
        """Pairs (from, to) that do not answer a ping; empty when the mesh is complete."""
        addresses = self.addresses()
        return [
            (src.index, dst)
            for src in self.nodes
            if src.pid is not None
            for dst, address in addresses.items()
            if dst != src.index and not self.ping(src, address)
        ]

    def wait_settled(self, node: Node, timeout: float = 15.0) -> bool:
        """Wait until, for every prefix, the node's installed route is the cheapest it knows.
        Pings work before that: babeld moves to a better route gradually (its smoothed
        metric has a 4 s half-life). Returns whether it settled within `timeout`."""

        def settled() -> bool:
            best: dict[str, int] = {}
            chosen: dict[str, int] = {}
            for r in self.status(node)["routes"]:
                if r["metric"] is None or r["metric"] >= INFINITY:
                    continue
                best[r["prefix"]] = min(best.get(r["prefix"], r["metric"]), r["metric"])
                if r["installed"]:
                    chosen[r["prefix"]] = r["metric"]
            return chosen == best

        deadline = time.monotonic() + timeout
        while not settled():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)
        return True

    def wait_reachable(self, timeout: float) -> float:
        """Wait until every node has routes to and pings every other; seconds it took."""
        start = time.monotonic()
        deadline = start + timeout
        while time.monotonic() < deadline:
            if (
                len(self.addresses()) == len([n for n in self.nodes if n.pid])
                and self.routes_complete()
                and not self.all_pairs_ping()
            ):
                return time.monotonic() - start
            time.sleep(0.05)
        raise LabError(f"mesh not fully reachable within {timeout:g} s")


def _within(prefix: str, network: IPv6Network) -> bool:
    try:
        return bool(IPv6Network(prefix, strict=False).subnet_of(network))
    except ValueError:
        return False


def farthest(lab: Lab, source: int = 1) -> int:
    """The node with the most hops from `source` (breadth-first over the lab's links)."""
    hops = {source: 0}
    frontier = [source]
    while frontier:
        nxt = []
        for here in frontier:
            for a, b in lab.links:
                for x, y in ((a, b), (b, a)):
                    if x == here and y not in hops:
                        hops[y] = hops[here] + 1
                        nxt.append(y)
        frontier = nxt
    return max(hops, key=lambda i: (hops[i], i))
