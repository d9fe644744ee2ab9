"""Start babeld as soon as the first usable link is known, before the daemon's heavy imports.

From exec to babeld spawned, babblerd used to spend ~0.35 s after Python's own start on
imports (trio 0.10 s, structlog 0.06 s, pyroute2 0.11 s) and its first netlink snapshot, all
of which babeld does not need: it needs its command line, the -c file and one interface.
This module, standard library and babbler's lean modules only, reads the links from sysfs,
takes a router id and spawns babeld from the main thread (the one that later runs trio, so
PR_SET_PDEATHSIG ties babeld to babblerd as for every later start). The daemon adopts the
process as its first session once it has its own netlink view, or stops it when that view
disagrees: any launch but the one it would start itself (babeld/launch.py `launch_for`).

The node's addresses come with it (the node address on loopback, a link address on that
link, as the daemon's first pass would add them): babeld announces them at once, and a node
joining a mesh is reachable when its neighbour is up, not 0.2-0.3 s later when the daemon has
its netlink view (docs/benchmarks.md "Join"). The daemon's book adopts them; they are removed
on the way out as every address of the node's is (`Early.withdraw` for a start that ends
before the daemon runs).

Only on Linux, in `always` mode, and only after a clean stop: leftovers of a babeld that died
with its babblerd (a pid file, stale `proto babel` routes) are the normal start's to clear.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import subprocess
import time
from dataclasses import dataclass, field
from ipaddress import IPv6Address

from babbler.core.addressing import interface_address, node_address
from babbler.core.addrplan import random_free_index
from babbler.core.config import Config
from babbler.core.errors import EnvironmentProblem
from babbler.core.links import Selector, usable_names
from babbler.core.meshkey import MeshKey
from babbler.daemon import routerids
from babbler.daemon.babeld.launch import BabeldFiles, Launch, found, launch_for, write_private
from babbler.daemon.ipv4 import Ipv4
from babbler.daemon.nodeid import NodeId
from babbler.daemon.spawn import ROUTING_NICE, STOP_GRACE, popen_gone, spawn, stop
from babbler.host.sysfs import read_links


@dataclass
class Early:
    """A babeld started before the daemon, waiting to be adopted."""

    launch: Launch
    popen: subprocess.Popen[bytes]
    spawned_at: float  # time.monotonic()
    adopted: bool = False  # the daemon's session owns the process now
    addresses: list[tuple[str, IPv6Address]] = field(default_factory=list)  # added here

    def stop(self) -> None:
        """Not adopted: end it (the daemon starts its own). Idempotent."""
        if self.adopted:
            return
        self.adopted = True  # nobody's: stopped here, once
        if self.popen.poll() is None:
            stop(self.popen.send_signal, popen_gone(self.popen), STOP_GRACE)
            self.popen.wait()
        if self.popen.stdout is not None:
            self.popen.stdout.close()

    def withdraw(self) -> None:
        """babblerd is leaving: remove the addresses added here (the daemon, if it ran,
        removed them already). Idempotent; what is gone is gone."""
        for name, address in self.addresses:
            with contextlib.suppress(OSError):
                change_address(RTM_DELADDR, name, address, deprecated=False)
        self.addresses.clear()


def why_not(config: Config) -> str | None:
    """Why babeld is not started early here, or None."""
    if not config.platform.early_start:
        return f"not on {config.platform.name}"
    if config.mode != "always":
        return f"mode {config.mode}"
    files = BabeldFiles.under(config.private_dir, config.state_dir)
    if files.pid.exists() or files.socket.exists():
        return "a previous babeld left files (the normal start clears them)"
    if not found(config.babeld):
        return f"{config.babeld} not found"
    return None


def start(config: Config, node: NodeId, key: MeshKey | None) -> tuple[Early | None, str]:
    """Spawn babeld on the first usable link, or say why not. Never raises for what the
    normal start would handle (an OSError here means: the normal start will see to it)."""
    reason = why_not(config)
    if reason:
        return None, reason
    try:
        links = read_links()
        usable = sorted(usable_names(links, Selector(config.interface, config.exclude)))
        if not usable:
            return None, "no usable link yet"
        first = usable[0]
        ipv4 = Ipv4.load(config.ipv4_prefix, config.state_dir, node.value)
        router_id = routerids.take(config.state_dir)
        launch = launch_for(config, key, ipv4, node.value, router_id, first, links[first])
        write_private(launch.files.config, launch.config_text())
        added = add_addresses(node.value, first)
        popen = spawn(launch.args(), tied=launch.tied, nice=ROUTING_NICE)
    except (OSError, EnvironmentProblem) as error:
        return None, f"cannot: {error}"
    return Early(launch, popen, time.monotonic(), addresses=added), f"on {first}"


def add_addresses(node_id: int, first: str) -> list[tuple[str, IPv6Address]]:
    """The node address on loopback and a link address (a random number, as the daemon's
    book picks one) on `first`, before babeld starts: what was added. One that fails is
    left to the daemon's first pass."""
    wanted = [
        (LOOPBACK_NAME, node_address(node_id), False),
        (first, interface_address(node_id, random_free_index(set())), True),
    ]
    added = []
    for name, address, deprecated in wanted:
        try:
            change_address(RTM_NEWADDR, name, address, deprecated)
        except OSError:
            continue
        added.append((name, address))
    return added


LOOPBACK_NAME = "lo"
RTM_NEWADDR, RTM_DELADDR = 20, 21
NLM_F_REQUEST, NLM_F_ACK, NLM_F_REPLACE, NLM_F_CREATE = 0x1, 0x4, 0x100, 0x400
IFA_ADDRESS, IFA_CACHEINFO, IFA_FLAGS, IFA_F_NODAD = 1, 6, 8, 0x02
FOREVER = 0xFFFFFFFF


def change_address(kind: int, name: str, address: IPv6Address, deprecated: bool) -> None:
    """Add (or replace) or remove one IPv6 /128 over netlink, as links/linux.py does with
    pyroute2 (no duplicate address detection; `deprecated`: valid for ever, preferred
    never). Raises OSError."""
    attrs = struct.pack("=HH16s", 20, IFA_ADDRESS, address.packed)
    if kind == RTM_NEWADDR:
        attrs += struct.pack("=HHI", 8, IFA_FLAGS, IFA_F_NODAD)
        if deprecated:
            attrs += struct.pack("=HHIIII", 20, IFA_CACHEINFO, 0, FOREVER, 0, 0)
    index = socket.if_nametoindex(name)
    body = struct.pack("=BBBBI", socket.AF_INET6, 128, 0, 0, index) + attrs
    flags = NLM_F_REQUEST | NLM_F_ACK
    if kind == RTM_NEWADDR:
        flags |= NLM_F_CREATE | NLM_F_REPLACE
    header = struct.pack("=IHHII", 16 + len(body), kind, flags, 1, 0)
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE) as sock:
        sock.send(header + body)
        reply = sock.recv(4096)
    error = -struct.unpack_from("=i", reply, 16)[0] if len(reply) >= 20 else 0
    if error:
        raise OSError(error, f"{os.strerror(error)}: {address} on {name}")
