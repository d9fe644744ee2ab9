"""The three ways a lab's nodes can be meshed, side by side on the same namespaces and links:
babblerd (its defaults), babeld alone with its own defaults, and babeld alone with babbler's
hello interval. Plus a reachability check with ping, parallel over source nodes."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from babbler.core.addressing import interface_address, node_range
from babbler.core.config import DEFAULT_HELLO_INTERVAL
from babbler.daemon.spawn import process_name
from babbler.lab import Lab, Node, probe, wait
from babbler.lab.processes import in_netns

MODES = ("babbler", "babeld-defaults", "babeld-same-hello")
# Extra babblerd flags per babbler mode; "babbler" is babblerd with its defaults.
BABBLER_MODES = {
    "babbler": [],
    "babbler-hello-0.25": ["--hello-interval", "0.25"],
    "babbler-ipv4": [],  # babbler with its defaults, probed over IPv4 node addresses
    "babbler-ipv4-off": ["--ipv4-prefix", "off"],
    "babbler-cost-96": ["--cost", "v*=96"],  # babeld's own default rxcost on wired links
}


def babelds_in(netns: str) -> list[int]:
    """The babeld processes running in a namespace."""
    pids = (int(entry) for entry in os.listdir("/proc") if entry.isdigit())
    return [p for p in pids if process_name(p) == "babeld" and in_netns(p, netns)]


@dataclass
class Mesh:
    """Runs one mode's routing on a lab and knows each node's address."""

    lab: Lab
    mode: str
    hello: float = DEFAULT_HELLO_INTERVAL  # babeld-same-hello: babeld alone at this interval
    babeld_options: str = ""  # babeld alone: more `default` interface options
    control: bool = False  # babeld alone: a control socket (`control_socket`)
    addresses: dict[int, str] = field(default_factory=dict)
    _babelds: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)

    def start(self, node: Node) -> None:
        """Start the node's routing (without waiting for it to serve anything)."""
        if self.mode in BABBLER_MODES:
            self.lab.spawn(node, BABBLER_MODES[self.mode])
            return
        node_id = random.getrandbits(48)
        links = [self.lab.end_name(a, b) for a, b in self.lab.links if a == node.index] + [
            self.lab.end_name(b, a) for a, b in self.lab.links if b == node.index
        ]
        for number, link in enumerate(sorted(links), start=1):
            address = interface_address(node_id, number)
            self.addresses.setdefault(node.index, str(address))
            subprocess.run(
                ["ip", "-n", node.netns, "addr", "add", f"{address}/128", "dev", link, "nodad"],
                check=True,
            )
        base = Path(node.base)
        base.mkdir(parents=True, exist_ok=True)
        conf = base / "babeld.conf"
        conf.write_text("")
        args = [
            "ip", "netns", "exec", node.netns, "babeld",
            "-c", str(conf), "-I", str(base / "babeld.pid"), "-S", str(base / "babel-state"),
            "-C", f"redistribute local ip {node_range(node_id)}",
            "-C", "redistribute local deny",
        ]  # fmt: skip
        if self.mode == "babeld-same-hello":
            args += ["-C", f"default hello-interval {self.hello:g}"]
        if self.babeld_options:
            args += ["-C", f"default {self.babeld_options}"]
        if self.control:
            args += ["-G", str(self.control_socket(node))]
        log = (base / "babeld.log").open("ab")
        self._babelds[node.index] = subprocess.Popen(
            [*args, *sorted(links)], stdout=log, stderr=log, start_new_session=True
        )

    def start_all(self) -> None:
        """Start every node: babblerd as `babbler-lab up` does (at most STARTING_AT_ONCE
        starting at a time: 64 Python start-ups at once on two cores left a 64-ring churning
        for minutes, docs/benchmarks.md "Scale"), babeld alone all at once."""
        if self.mode in BABBLER_MODES:
            self.lab.start_all(extra=BABBLER_MODES[self.mode])
            return
        for node in self.lab.nodes:
            self.start(node)

    def ready(self, node: Node) -> None:
        """babblerd: wait until it serves, and learn its address."""
        if self.mode in BABBLER_MODES:
            self.lab.wait_served(node)

    def address(self, node: Node) -> str | None:
        if self.mode == "babbler-ipv4" and node.index not in self.addresses:
            found_v4 = self.lab.status(node)["node_address_v4"]
            if found_v4:
                self.addresses[node.index] = found_v4
        elif self.mode in BABBLER_MODES and node.index not in self.addresses:
            found = self.lab.status(node)["addresses"]
            if found:
                self.addresses[node.index] = found[0]["address"]
        return self.addresses.get(node.index)

    def kill(self, node: Node) -> None:
        """The node dies as a machine that loses power: its links go dark (their peers
        lose carrier: a Mac's port stays up, `status: inactive`) and its routing is
        SIGKILLed (on Linux babblerd takes its babeld along; on macOS babeld is ended too).
        Killing the daemons alone would leave the node forwarding on its kernel's routes."""
        for a, b in self.lab.links:
            if node.index in (a, b):
                here, there = (a, b) if a == node.index else (b, a)
                name = self.lab.end_name(here, there)
                subprocess.run(["ip", "-n", node.netns, "link", "set", name, "down"], check=True)
        if self.mode in BABBLER_MODES:
            assert node.pid is not None
            os.kill(node.pid, signal.SIGKILL)
            self.lab.wait_exit(node)
            node.pid = None
            for pid in babelds_in(node.netns):  # a Mac's babeld outlives babblerd
                os.kill(pid, signal.SIGKILL)
        else:
            process = self._babelds.pop(node.index)
            process.kill()
            process.wait()
        self.addresses.pop(node.index, None)

    def control_socket(self, node: Node) -> Path:
        """babeld alone with `control`: where its control socket is."""
        return Path(node.base) / "babeld.sock"

    def babeld_pids(self) -> dict[int, int]:
        """Node index -> pid of its babeld (the babeld-alone modes)."""
        return {index: process.pid for index, process in self._babelds.items()}

    def stop(self) -> None:
        for process in self._babelds.values():
            process.terminate()
        for process in self._babelds.values():
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._babelds.clear()


def unreachable(lab: Lab, mesh: Mesh, nodes: list[Node]) -> int:
    """How many (source, destination) pairs among `nodes` do not answer one ping (0.2 s)."""
    targets = {n.index: mesh.address(n) for n in nodes}
    if any(a is None for a in targets.values()):
        return len(nodes) * (len(nodes) - 1)
    return len(probe.unanswered(nodes, cast(dict[int, str], targets), wait=0.2))


def routes_ready(mesh: Mesh, nodes: list[Node]) -> bool:
    """Whether every node's kernel has a babel route to every other node's address. One
    `ip` per node: the ping sweep (N x (N-1) pings, 4,032 processes on a 64-node lab, every
    round) only runs once it can succeed, instead of loading the machine it measures."""
    missing = missing_routes(mesh, nodes)
    return missing is not None and not any(missing.values())


def missing_routes(mesh: Mesh, nodes: list[Node]) -> dict[int, set[str]] | None:
    """Per node index, the other nodes' addresses its kernel has no babel route to; None
    while a node's address is not known yet."""
    targets = {n.index: mesh.address(n) for n in nodes}
    if any(a is None for a in targets.values()):
        return None

    family = "-4" if any("." in str(a) for a in targets.values()) else "-6"

    def missing(node: Node) -> set[str]:
        # every table: babblerd's babeld uses its own (core/fence.py), babeld alone `main`
        command = ["ip", "-n", node.netns, family, "route", "show", "table", "all"]
        shown = subprocess.run(
            [*command, "proto", "babel"], capture_output=True, text=True, check=False
        ).stdout
        routed = {line.split()[0] for line in shown.splitlines() if " via " in line}
        return {str(a) for i, a in targets.items() if i != node.index} - routed

    return dict(zip((n.index for n in nodes), probe.from_each(nodes, missing), strict=True))


def wait_reachable(lab: Lab, mesh: Mesh, nodes: list[Node], since: float, limit: float) -> float:
    """Seconds from `since` until every pair among `nodes` pings; raises after `limit`."""

    def ready() -> bool:
        return routes_ready(mesh, nodes) and unreachable(lab, mesh, nodes) == 0

    if not wait.until(ready, since + limit - time.monotonic(), every=0.02):
        raise TimeoutError(f"{mesh.mode}: not reachable within {limit:g} s")
    return time.monotonic() - since
