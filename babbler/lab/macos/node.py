"""A lab node as a Mac: its namespace shaped as a Mac's links are (`lo0`, `bridge0`, ports
`en2`, `en3`, ...), its description for the commands (`macos.json`: hardware ports,
Thunderbolt buses), its command server and the commands on its PATH."""

from __future__ import annotations

import json
import os
import re
import sys
import uuid
from collections.abc import Mapping
from pathlib import Path

from babbler.lab import files, netns, wait
from babbler.lab.macos import shims
from babbler.lab.macos.server import DESCRIPTION
from babbler.lab.node import Node
from babbler.lab.topology import LabError

FIRST_PORT = 2  # a Mac's Thunderbolt ports are en2, en3, ... (en0: Ethernet, en1: Wi-Fi)
BRIDGE = "bridge0"  # "Thunderbolt Bridge": a new Mac's Thunderbolt ports start in it
ETHERNET = "en0"  # "Ethernet": a Mac mini's or Mac Studio's port, with no cable in the lab
LOOPBACK_MTU = 16384
LOOPBACK_LINK_LOCAL = "fe80::1/64"  # every Mac's lo0 has it (`inet6 fe80::1%lo0`)
SERVER_WAIT = 15.0  # its start (Python and pyroute2) on a loaded 2-core machine: < 1 s
SERVER = "babbler.lab.macos.server"
SITE = Path(__file__).parent / "site"  # netifaces as on a Mac (site/netifaces.py)
MAC_ROOT = "mac"  # in the node's directory: its "/" for install-system-daemon
MACOS = "26.2"  # a lab Mac's version: the first with RDMA over Thunderbolt
RDMA_STATES = ("enabled", "disabled", "no-devices")  # no-devices: enabled, none listed


def port_name(node: Node, link: str) -> str:
    """The name of the lab link `link` (`v1x2`) at this macOS node: en2 for its first port."""
    if link not in node.ports:
        node.ports.append(link)
    return f"en{FIRST_PORT + node.ports.index(link)}"


def domain(lab: str, node: Node) -> str:
    """The node's Thunderbolt domain UUID (stable for a lab and node, as a Mac's is)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"babbler-lab:{lab}:{node.index}")).upper()


def shape(namespace: str) -> None:
    """The namespace's links as a Mac has them before any cable: lo0 (with a Mac's fe80::1
    besides 127.0.0.1 and ::1), en0 (its Ethernet port, no cable in it: a tap no program
    holds is up without carrier, so it has no link-local, as a Mac's port with `status:
    inactive`) and bridge0."""
    netns.run("ip", "-n", namespace, "link", "set", "lo", "down")
    netns.run("ip", "-n", namespace, "link", "set", "lo", "name", "lo0")
    netns.run("ip", "-n", namespace, "link", "set", "lo0", "mtu", str(LOOPBACK_MTU), "up")
    netns.run("ip", "-n", namespace, "-6", "addr", "add", LOOPBACK_LINK_LOCAL, "dev", "lo0")
    netns.run("ip", "-n", namespace, "tuntap", "add", ETHERNET, "mode", "tap")
    netns.run("ip", "-n", namespace, "link", "set", ETHERNET, "up")
    netns.run("ip", "-n", namespace, "link", "add", BRIDGE, "type", "bridge")
    netns.run("ip", "-n", namespace, "link", "set", BRIDGE, "up")


def bridge_port(namespace: str, name: str) -> None:
    """A port into bridge0 as on a new Mac: without an IPv6 link-local address."""
    sysctl = f"net.ipv6.conf.{name}.addr_gen_mode=1"
    netns.run("ip", "netns", "exec", namespace, "sysctl", "-qw", sysctl)
    netns.run("ip", "-n", namespace, "link", "set", name, "master", BRIDGE)
    netns.run("ip", "-n", namespace, "-6", "addr", "flush", "dev", name, "scope", "link")


def describe(lab: str, node: Node, far: Mapping[str, Node], speed: int) -> None:
    """Write macos.json: the hardware ports (en0, bridge0, Thunderbolt 1.. for en2..) and a
    Thunderbolt bus per port; `far`: port -> the node at its other end (a macOS node's
    domain; another machine's too: a Linux node stands for a Mac without babbler)."""
    ports = [["Ethernet", ETHERNET], ["Thunderbolt Bridge", BRIDGE]]  # Apple Silicon's order
    buses = []
    for i, _ in enumerate(node.ports):
        device = f"en{FIRST_PORT + i}"
        ports.append([f"Thunderbolt {i + 1}", device])
        other = far.get(device)
        buses.append(
            {
                "device": device,
                "receptacle": i + 1,
                "speed_gbps": speed,
                "domain": domain(lab, node),
                "far": domain(lab, other) if other is not None else None,
                "far_name": f"Mac {other.name}" if other is not None else "Mac",
            }
        )
    described = {"machine": f"Mac {node.name}", "ports": ports, "buses": buses, **_mac(node)}
    files.write_file(Path(node.base) / DESCRIPTION, json.dumps(described, indent=1))


def _mac(node: Node) -> dict[str, str]:
    """The node's macOS version and RDMA state as described, else a Mac ready for jaccl
    (26.2, enabled; with `--thunderbolt 5` cables)."""
    try:
        told = json.loads((Path(node.base) / DESCRIPTION).read_text())
    except (OSError, ValueError):
        told = {}
    return {"macos": told.get("macos", MACOS), "rdma": told.get("rdma", "enabled")}


def set_mac(node: Node, macos: str | None = None, rdma: str | None = None) -> dict[str, str]:
    """Change what the node's `sw_vers` and `rdma_ctl status`/`ibv_devices` say (as after
    an update, or `rdma_ctl enable` in Recovery): the commands answer so at once; babblerd
    reads them when a link changes or it starts. Returns the node's settings now."""
    if rdma is not None and rdma not in RDMA_STATES:
        raise LabError(f"--rdma {rdma}: one of {', '.join(RDMA_STATES)}")
    if macos is not None and not re.fullmatch(r"\d{1,3}(\.\d{1,3}){0,2}", macos):
        raise LabError(f"--macos {macos}: a version such as 26.2")
    path = Path(node.base) / DESCRIPTION
    described = json.loads(path.read_text())
    described.update({k: v for k, v in (("macos", macos), ("rdma", rdma)) if v is not None})
    files.write_file(path, json.dumps(described, indent=1))
    return _mac(node)


def environment(node: Node) -> dict[str, str]:
    """What a process on the node runs with: the node's commands first on PATH, the
    platform for `babblerctl doctor`, and its root for install-system-daemon."""
    here = str(Path(sys.executable).parent)  # the lab's own programs: babblerctl, babblerd
    path = os.pathsep.join([str(node.bin_dir), here, os.environ.get("PATH", "/usr/bin:/bin")])
    return {
        "PATH": path,
        "BABBLER_PLATFORM": "macos",
        "PYTHONPATH": str(SITE),
        # the node's own "/" for what `babblerd install-system-daemon` writes (a Mac's
        # /Library/LaunchDaemons, /etc/babbler, /var/...): service/launchd.py
        "BABBLER_MAC_ROOT": str(Path(node.base) / MAC_ROOT),
    }


def server_command(node: Node) -> list[str]:
    return ["ip", "netns", "exec", node.netns, sys.executable, "-m", SERVER, node.base]


def wait_answering(node: Node) -> None:
    """Until the node's commands answer (`ifconfig -l` lists lo0). Raises LabError."""

    def answers() -> bool:
        done = netns.run(
            "ip", "netns", "exec", node.netns, str(node.bin_dir / "ifconfig"), "-l", check=False
        )
        return done.returncode == 0 and "lo0" in done.stdout.split()

    if not wait.until(answers, SERVER_WAIT, every=0.05):
        log = Path(node.base) / "macos-server.log"
        raise LabError(f"{node.name}'s macOS command server does not answer (see {log})")


def install_commands(node: Node) -> None:
    shims.install(node.bin_dir)
