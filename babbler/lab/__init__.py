"""`babbler-lab`: a mesh of N nodes in network namespaces, each running babblerd with real
babeld, wired by veth pairs. The demo, the benchmarks and the integration tests use `Lab`.

Everything a lab creates is named after it (namespaces `bbl-<lab>-n<i>`, files under
`/run/babbler-lab/<lab>`, root's) and recorded in `lab.json`, so that `down` removes exactly
that: processes are ended by their recorded pid, never by name, and only while they run in
the node's namespace. The record is read only from a directory that passed `files`' checks,
and only if it names this lab's namespaces and directories (`record`).

Modules: `topology` (pure: edges, names, hops), `netns` (namespaces and links), `processes`
(the daemons), `probe` (status, pings, waiting for the mesh), `node` (one node's record),
`files` (the lab's directories and files, checked), `record` (pure: what lab.json may hold),
`macos/` (nodes that act as Macs: `--platform macos`, docs/macos.md).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from babbler.client import ask
from babbler.lab import files, netns, probe
from babbler.lab.macos import node as mac
from babbler.lab.node import Node
from babbler.lab.processes import RESPONDER, Daemons, alive, end, end_all_in, pids_in
from babbler.lab.record import MAX_NODES, SPEEDS, check_record, netns_name, node_base
from babbler.lab.topology import TOPOLOGIES, LabError, LabNotUp, edges, farthest_from, link_name

__all__ = [
    "PLATFORMS",
    "SPEEDS",
    "TOPOLOGIES",
    "Lab",
    "LabError",
    "LabNotUp",
    "Node",
    "farthest",
    "link_name",
]

# Root's: /run is root's alone (no other user can make or swap a name in it, as anyone can
# in /tmp) and empties at boot, as the namespaces do.
LAB_ROOT = Path("/run/babbler-lab")
# A 64-node lab's record is ~10 KB: a much larger one was not written by the lab.
RECORD_LIMIT = 1 << 20
# A pid file holds a number and a newline.
PID_FILE_LIMIT = 32
# The lab's links are virtual: name them explicitly (babblerd skips virtual links by default).
LINK_GLOB = "v*"
# A babblerd's start costs ~0.3 s of CPU (Python and its imports), its bench responder's
# more; 64 started at once on this 2-core machine shared it 130 ways (load average 134)
# and some did not serve within 15 s. Up to this many start together; the rest follow as
# those serve. Rings of up to 16, as the tests and benchmarks run them, still start at once.
STARTING_AT_ONCE = 16
# What each node acts as: every one Linux or macOS, or mixed (odd nodes Linux, even macOS).
PLATFORMS = ("linux", "macos", "mixed")


def node_platform(platform: str, index: int) -> str:
    if platform == "mixed":
        return "linux" if index % 2 else "macos"
    return platform


@dataclass
class Lab:
    name: str
    topology: str
    nodes: list[Node] = field(default_factory=list)
    links: list[tuple[int, int]] = field(default_factory=list)
    daemon_args: list[str] = field(default_factory=list)
    # Links as cables: the kernel's DAD defaults, created down, plugged (`plug_all`) after
    # the daemons run. Otherwise links are up from the start, without DAD.
    real_links: bool = False
    # macOS nodes: the Thunderbolt their cables are, in Gb/s (SPEEDS), each described so.
    speed_gbps: int = SPEEDS[0]
    # Cables added beside the `v*` set (`add_link` with another prefix): (a, b, prefix).
    cables: list[tuple[int, int, str]] = field(default_factory=list)
    daemons: Daemons = field(default_factory=Daemons, repr=False, compare=False)

    @property
    def base(self) -> Path:
        return LAB_ROOT / self.name

    def save(self) -> None:
        """Write lab.json (in the lab's directory, made and checked first). Raises LabError."""
        files.make_dir(LAB_ROOT)
        files.make_dir(self.base)
        record = {
            "name": self.name,
            "topology": self.topology,
            "nodes": [vars(n) for n in self.nodes],
            "links": self.links,
            "daemon_args": self.daemon_args,
            "real_links": self.real_links,
            "speed_gbps": self.speed_gbps,
            "cables": self.cables,
        }
        files.write_file(self.base / "lab.json", json.dumps(record, indent=1))

    @classmethod
    def load(cls, name: str) -> Lab:
        """The lab `name` as its lab.json records it. Raises LabNotUp when there is none,
        LabError when its directory or record is not one the lab made."""
        base = LAB_ROOT / name
        try:
            files.check_dir(base)
            text = files.read_file(base / "lab.json", RECORD_LIMIT)
        except FileNotFoundError:
            raise LabNotUp(f"no lab named {name!r} is up (no {base}/lab.json)") from None
        try:
            parsed = json.loads(text)
        except ValueError:
            raise LabError(f"refusing {base}/lab.json: not JSON; remove {base}") from None
        data = check_record(parsed, name, str(base))
        data["nodes"] = [Node(**n) for n in data["nodes"]]
        data["links"] = [tuple(pair) for pair in data["links"]]
        data["cables"] = [tuple(cable) for cable in data["cables"]]
        return cls(**data)

    def node(self, name: str) -> Node:
        for node in self.nodes:
            if name in (node.name, str(node.index), node.netns):
                return node
        raise LabError(f"no node {name!r} in lab {self.name} (nodes: n1..n{len(self.nodes)})")

    # -- building ------------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        name: str,
        nodes: int,
        topology: str,
        daemon_args: list[str],
        real_links: bool = False,
        platform: str = "linux",
        bridged: bool = False,
        speed_gbps: int = 40,
    ) -> Lab:
        """Namespaces and links only; `start` runs the daemons. Cleans up after itself on
        error. `platform`: what the nodes act as (PLATFORMS); macOS nodes get a Mac's links
        (lab/macos/), their Thunderbolt ports in bridge0 when `bridged`, as on a new Mac,
        described as Thunderbolt links of `speed_gbps`."""
        if platform not in PLATFORMS:
            raise LabError(f"--platform must be one of {', '.join(PLATFORMS)}")
        if speed_gbps not in SPEEDS:
            raise LabError(f"a Thunderbolt cable's speed is one of {SPEEDS} Gb/s")
        if not re.fullmatch(r"[A-Za-z0-9_]{1,24}", name):
            raise LabError(f"lab name must be 1-24 letters, digits or _, got {name!r}")
        if not 1 <= nodes <= MAX_NODES:
            raise LabError(f"--nodes must be between 1 and {MAX_NODES}")
        files.make_dir(LAB_ROOT)
        if os.path.lexists(files.make_dir(LAB_ROOT / name) / "lab.json"):
            raise LabError(
                f"a lab named {name!r} is already up: pick another --name (or, to replace"
                f" it, take it down first: babbler-lab --name {name} down)"
            )
        lab = cls(
            name,
            topology,
            links=edges(nodes, topology),
            daemon_args=daemon_args,
            real_links=real_links,
            speed_gbps=speed_gbps,
        )
        try:
            for i in range(1, nodes + 1):
                acts = node_platform(platform, i)
                node = Node(i, netns_name(name, i), node_base(str(lab.base), i), platform=acts)
                files.make_dir(Path(node.base))
                lab.nodes.append(node)  # first: a namespace made halfway goes with `down`
                lab.save()
                netns.add_namespace(node.netns, real_links)
                if node.macos:
                    mac.shape(node.netns)
            for a, b in lab.links:
                lab.add_link(a, b, bridged=bridged)
            for node in lab.nodes:
                if node.macos:
                    lab.start_commands(node)
        except BaseException:
            lab.down()
            raise
        return lab

    def end_name(self, a: int, b: int, prefix: str = "v") -> str:
        """The name of node a's end of its link to b: `v1x2` on Linux, `en2`... on macOS."""
        node = self.nodes[a - 1]
        return (
            mac.port_name(node, link_name(a, b, prefix)) if node.macos else link_name(a, b, prefix)
        )

    def add_link(self, a: int, b: int, prefix: str = "v", bridged: bool = False) -> None:
        """A veth link between nodes a and b, recorded; links of another `prefix` form a
        second set (the Linux daemons use `v*` only unless started with `--interface
        PREFIX*`; macOS ones every Thunderbolt port). `bridged`: a macOS end joins bridge0.
        A macOS end is described at once (its speed, the far end's domain)."""
        names = (self.end_name(a, b, prefix), self.end_name(b, a, prefix))
        ends = (a, self.nodes[a - 1].netns, b, self.nodes[b - 1].netns, prefix)
        netns.add_link(*ends, up=False, names=names)
        for node, port in zip((self.nodes[a - 1], self.nodes[b - 1]), names, strict=True):
            if node.macos and bridged:
                mac.bridge_port(node.netns, port)
        if not self.real_links:
            netns.plug(*ends, names=names)
        if prefix != "v":
            self.cables.append((a, b, prefix))
        elif (a, b) not in self.links and (b, a) not in self.links:
            self.links.append((a, b))
        for node in (self.nodes[a - 1], self.nodes[b - 1]):
            if node.macos and node.helper_pid is not None:  # a port added since it started
                mac.describe(self.name, node, self.far_ends(node), self.speed_gbps)
        self.save()

    def plug(self, a: int, b: int, up: bool = True, prefix: str = "v") -> None:
        """The cable between nodes a and b plugged in (`up`), or pulled out."""
        names = (self.end_name(a, b, prefix), self.end_name(b, a, prefix))
        ends = (a, self.nodes[a - 1].netns, b, self.nodes[b - 1].netns, prefix)
        netns.plug(*ends, names=names, up=up)

    def plug_all(self) -> None:
        """Every link's ends up (real links are created down)."""
        for a, b in self.links:
            self.plug(a, b)

    def every_cable(self) -> list[tuple[int, int, str]]:
        """Every cable of the lab, of every set: (a, b, prefix)."""
        return [(a, b, "v") for a, b in self.links] + self.cables

    def far_ends(self, node: Node) -> dict[str, Node]:
        """Node's link ends, of every cable set -> the node at the other end."""
        out = {}
        for a, b, prefix in self.every_cable():
            for here, there in ((a, b), (b, a)):
                if here == node.index:
                    out[self.end_name(here, there, prefix)] = self.nodes[there - 1]
        return out

    def start_commands(self, node: Node) -> None:
        """A macOS node's commands: its description, its command server, the commands on
        its PATH; returns once they answer."""
        mac.describe(self.name, node, self.far_ends(node), self.speed_gbps)
        mac.install_commands(node)
        log = Path(node.base) / "macos-server.log"
        node.helper_pid = self.daemons.spawn(mac.server_command(node), log)
        self.save()
        mac.wait_answering(node)

    def down(self) -> None:
        """Stop every daemon we started, any babeld they left, and whatever else runs in the
        lab's namespaces (a bench responder a killed babblerd left, a babblerd started by
        hand through `exec`: it would start babeld again once its namespace is gone); delete
        namespaces and files. A namespace is deleted only once nothing runs in it (a process
        left in one deleted would run on unseen): raises LabError naming what is left, with
        its namespace and the record kept for another `down`."""
        for node in self.nodes:
            if node.pid is not None:
                end(node.pid, "babbler.daemon.cli", node.netns)
                self.daemons.reap(node.pid)
            if node.helper_pid is not None:
                end(node.helper_pid, mac.SERVER, node.netns)
                self.daemons.reap(node.helper_pid)
            try:  # the daemon's file: it may run as another user (as its unit does)
                pid_file = node.run_dir / "private" / "babeld.pid"
                babeld = int(files.read_file(pid_file, PID_FILE_LIMIT, owned=False))
                end(babeld, "babeld", node.netns)
            except (OSError, ValueError, LabError):
                pass
        left = {}
        for node in self.nodes:
            end_all_in(node.netns)
            if pids := pids_in(node.netns):
                left[node.netns] = pids
        netns.delete_namespaces([node.netns for node in self.nodes if node.netns not in left])
        if left:
            running = "; ".join(f"{name}: pids {pids}" for name, pids in left.items())
            raise LabError(
                f"lab {self.name}: processes still run after SIGKILL ({running}); their "
                f"namespaces are kept: run `babbler-lab --name {self.name} down` again"
            )
        shutil.rmtree(self.base, ignore_errors=True)

    # -- daemons -------------------------------------------------------------------------------

    def start(self, node: Node, extra: list[str] | None = None, prefix: Sequence[str] = ()) -> None:
        """Start babblerd in the node's namespace and wait until its socket answers.
        `prefix` runs it through another program, e.g. setpriv to drop privileges."""
        self.spawn(node, extra, prefix)
        self.wait_served(node)

    def spawn(self, node: Node, extra: list[str] | None = None, prefix: Sequence[str] = ()) -> None:
        """Start babblerd in the node's namespace without waiting for it (see `start`); it
        makes its run and state directories itself. Raises LabError for an unsafe log."""
        environment = [f"{k}={v}" for k, v in mac.environment(node).items()] if node.macos else []
        where = ("ip", "netns", "exec", node.netns, *prefix)
        program = (*where, *(["env", *environment] if environment else []), sys.executable, "-m")
        args = [*program, "babbler.daemon.cli", *self.daemon_command_line(node, extra)]
        node.pid = self.daemons.spawn(args, node.log)
        self.save()

    def daemon_command_line(self, node: Node, extra: list[str] | None = None) -> list[str]:
        """The flags babblerd gets on `node` (after the program's name)."""
        # A macOS node picks its links itself: every Thunderbolt port (networksetup)
        chosen = ("--platform", "macos") if node.macos else ("--interface", LINK_GLOB)
        return [
            *("--run-dir", str(node.run_dir), "--state-dir", str(node.state_dir)),
            *chosen,
            *("--log-format", "json"),
            *("--name", node.name),  # the namespaces share one host name
            *self.daemon_args,
            *(extra or []),
        ]

    def running(self, node: Node) -> bool:
        """The node's babblerd, as recorded, still runs (also one another process started)."""
        return node.pid is not None and alive(node.pid, "babbler.daemon.cli", node.netns)

    def stop(self, node: Node) -> None:
        """End the node's babblerd (SIGTERM: a clean stop). Its babeld goes with it, and
        so does a bench responder that a babblerd killed before left running (a macOS
        node's children do not die with babblerd)."""
        if node.pid is not None:
            end(node.pid, "babbler.daemon.cli", node.netns)
            self.daemons.reap(node.pid)
            node.pid = None
            self.save()
        end_all_in(node.netns, RESPONDER)

    def cable(self, a: int, b: int) -> tuple[int, int]:
        """The lab's link between nodes a and b, as it records it. Raises LabError."""
        for pair in ((a, b), (b, a)):
            if pair in self.links:
                return pair
        raise LabError(f"no cable between n{a} and n{b} in lab {self.name}")

    def exited(self, node: Node) -> int | None:
        """The exit status of a daemon this process started, or None while it runs."""
        return self.daemons.exited(node.pid, node.name)

    def wait_served(self, node: Node) -> None:
        """Wait until a daemon started with `spawn` answers on its socket."""
        self.daemons.wait_served(node.pid, node.name, node.socket, node.log)

    def start_all(self, at_once: int = STARTING_AT_ONCE, extra: list[str] | None = None) -> None:
        """Start every node together (as machines powered on together would), but with at
        most `at_once` daemons still starting at any time (STARTING_AT_ONCE); `extra`: more
        babblerd flags for each."""
        for index, node in enumerate(self.nodes):
            if index >= at_once:
                self.wait_served(self.nodes[index - at_once])
            self.spawn(node, extra)
        for node in self.nodes[-at_once:]:
            self.wait_served(node)

    def wait_exit(self, node: Node, timeout: float = 5.0) -> int:
        """The exit status of a daemon this process started. Raises LabError on timeout."""
        return self.daemons.wait_exit(node.pid, node.name, timeout)

    # -- looking -------------------------------------------------------------------------------

    def status(self, node: Node) -> dict[str, Any]:
        value: dict[str, Any] = ask(node.socket, "status")
        return value

    def exec(self, node: Node, *cmd: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        """Run `cmd` in the node's namespace (a macOS node's: with its commands first on
        PATH and babblerctl checking as macOS)."""
        if node.macos:
            cmd = ("env", *(f"{k}={v}" for k, v in mac.environment(node).items()), *cmd)
        return probe.exec_in(node, *cmd, timeout=timeout)

    def ping(self, source: Node, address: str, wait: float = 1) -> bool:
        return probe.ping(source, address, wait)

    def routes_complete(self) -> bool:
        return probe.routes_complete(self.nodes)

    def addresses(self) -> dict[int, str]:
        return probe.addresses(self.nodes)

    def all_pairs_ping(self) -> list[tuple[int, int]]:
        return probe.all_pairs_ping(self.nodes)

    def wait_settled(self, node: Node, timeout: float = 15.0) -> bool:
        return probe.wait_settled(node, timeout)

    def wait_reachable(self, timeout: float) -> float:
        return probe.wait_reachable(self.nodes, timeout)


def farthest(lab: Lab, source: int = 1) -> int:
    """The node with the most hops from `source` over the lab's links."""
    return farthest_from(lab.links, source)
