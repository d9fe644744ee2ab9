"""babblerd harms nothing else on its host. The middle node of a line also has an uplink to a
LAN namespace: its default route comes from router advertisements (radvd) and lives through
start, running, a babeld SIGKILL, a babblerd SIGKILL and restart, and stop; IPv4 crosses it
without ip_forward; and a LAN host that routes the mesh prefixes via it reaches nobody
behind it, nor does the mesh reach the LAN through it."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from babbler.core.fence import TABLE
from babbler.lab import Lab, Node, netns, probe
from tests.integration.helpers import LabFactory, sysctl, until
from tests.needs import tool

pytestmark = pytest.mark.integration

RADVD_CONF = """interface up0 {
    AdvSendAdvert on;
    MinRtrAdvInterval 3;
    MaxRtrAdvInterval 4;
    AdvDefaultLifetime 9;
    prefix fd99:1::/64 { AdvOnLink on; AdvAutonomous on; };
};
"""
# A default route learned from an RA lives AdvDefaultLifetime (9 s) unless RAs refresh it:
# still there after 30 s means the node still takes the RAs that follow.
RA_LIFETIME = 9.0
RUNNING = 30.0


def default_route(lab: Lab, node: Node) -> str:
    return lab.exec(node, "ip", "-6", "route", "show", "default").stdout.strip()


def add_lan(node: Node) -> str:
    """A LAN namespace cabled to `node` (its `lan0`, not a mesh link; the LAN's end `up0`),
    with fd99:1::/64 and 192.168.77.0/24 on it. Returns the namespace's name."""
    lan = f"{node.netns}-lan"
    netns.add_namespace(lan)
    pair = ["lan0", "netns", node.netns, "type", "veth", "peer", "name", "up0"]
    netns.run("ip", "link", "add", *pair, "netns", lan)
    netns.run("ip", "-n", node.netns, "link", "set", "lan0", "up")
    netns.run("ip", "-n", node.netns, "addr", "add", "192.168.77.2/24", "dev", "lan0")
    netns.run("ip", "-n", lan, "link", "set", "up0", "up")
    netns.run("ip", "-n", lan, "addr", "add", "fd99:1::1/64", "dev", "up0", "nodad")
    netns.run("ip", "-n", lan, "addr", "add", "192.168.77.1/24", "dev", "up0")
    netns.run("ip", "netns", "exec", lan, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1")
    return lan


def test_an_ra_learned_default_route_survives_and_ipv4_needs_no_ip_forward(
    make_lab: LabFactory, tmp_path: Path
) -> None:
    radvd = tool("radvd", "radvd")
    lab = make_lab(3, "line", False)  # n1 - n2 - n3; n2 also has an uplink
    n1, n2, n3 = lab.nodes
    lan = add_lan(n2)
    served: subprocess.Popen[bytes] | None = None
    try:
        assert sysctl(lab, n2, "net.ipv6.conf.lan0.accept_ra") == "1"  # the kernel's default
        conf = tmp_path / "radvd.conf"
        conf.write_text(RADVD_CONF)
        pidfile = str(tmp_path / "radvd.pid")
        command = [radvd, "-n", "-C", str(conf), "-p", pidfile, "-m", "stderr"]
        served = subprocess.Popen(["ip", "netns", "exec", lan, *command], stderr=subprocess.DEVNULL)
        until(lambda: "via fe80" in default_route(lab, n2), what="n2's default route from RAs")
        assert sysctl(lab, n2, "net.ipv6.conf.all.forwarding") == "0"

        lab.start_all()
        lab.wait_reachable(60)
        assert sysctl(lab, n2, "net.ipv6.conf.all.forwarding") == "1"  # the mesh routes
        assert sysctl(lab, n2, "net.ipv6.conf.lan0.accept_ra") == "2"  # RAs kept
        assert sysctl(lab, n2, "net.ipv6.conf.v2x1.accept_ra") == "0"  # none on the mesh
        assert "via fe80" in default_route(lab, n2), "started: the default route went"
        # IPv4 crosses n2 (n1 to n3's node address) with ip_forward left 0
        target = str(lab.status(n3)["node_address_v4"])
        until(lambda: probe.ping(n1, target), what="n1 pings n3 over IPv4 through n2")
        assert sysctl(lab, n2, "net.ipv4.ip_forward") == "0"
        time.sleep(RUNNING)  # RAs must keep refreshing it (it lives RA_LIFETIME without)
        assert "via fe80" in default_route(lab, n2), "running: the RAs were ignored"
        babeld = int((n2.run_dir / "private" / "babeld.pid").read_text())
        os.kill(babeld, signal.SIGKILL)
        until(lambda: lab.status(n2)["babeld"]["pid"] not in (None, babeld), what="new babeld")
        assert "via fe80" in default_route(lab, n2), "babeld killed: the default route went"
        os.kill(n2.pid or 0, signal.SIGKILL)  # babblerd itself: nothing put back...
        lab.wait_exit(n2)
        assert sysctl(lab, n2, "net.ipv6.conf.lan0.accept_ra") == "2"
        lab.start(n2)  # ...until the next start, which takes over and stops cleanly
        until(lambda: probe.ping(n1, target), what="n1 pings n3 again")
        assert sysctl(lab, n2, "net.ipv6.conf.all.forwarding") == "1"
        os.kill(n2.pid or 0, signal.SIGTERM)
        lab.wait_exit(n2)
        assert sysctl(lab, n2, "net.ipv6.conf.lan0.accept_ra") == "1"  # put back
        assert sysctl(lab, n2, "net.ipv6.conf.all.forwarding") == "0"
        assert sysctl(lab, n2, "net.ipv6.conf.v2x1.accept_ra") == "1"
        assert sysctl(lab, n2, "net.ipv4.conf.v2x1.forwarding") == "0"
        assert rules(lab, n2) == [], "stopped: rules left"
        assert "via fe80" in default_route(lab, n2), "stopped: the default route went"
    finally:
        if served is not None:
            served.terminate()
            served.wait(timeout=10)
        netns.delete_namespaces([lan])


def rules(lab: Lab, node: Node) -> list[str]:
    """babblerd's policy-routing rules in the node, both families."""
    shown = [lab.exec(node, "ip", family, "rule").stdout for family in ("-4", "-6")]
    return [line for out in shown for line in out.splitlines() if "proto babel" in line]


def echoes(namespace: str) -> int:
    """Echo requests that arrived in a namespace, IPv4 and IPv6."""
    snmp = netns.run("ip", "netns", "exec", namespace, "cat", "/proc/net/snmp", "/proc/net/snmp6")
    lines = snmp.stdout.splitlines()
    header, values = (line.split() for line in lines if line.startswith("Icmp:"))
    v4 = int(values[header.index("InEchos")])
    v6 = next(int(line.split()[1]) for line in lines if line.startswith("Icmp6InEchos "))
    return v4 + v6


def pings(namespace: str, address: str) -> bool:
    run = ["ip", "netns", "exec", namespace, "ping", "-c", "5", "-i", "0.2", "-W", "1", address]
    return subprocess.run(run, capture_output=True, check=False).returncode == 0


def test_a_lan_host_routing_the_mesh_via_a_node_reaches_nobody_behind_it(
    make_lab: LabFactory,
) -> None:
    """n2 was already a router (forwarding on, both families): the fence alone must hold."""
    lab = make_lab(3, "line", False)  # n1 - n2 - n3; n2's lan0 goes to the LAN
    n1, n2, n3 = lab.nodes
    lan = add_lan(n2)
    try:
        for setting in ("net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1"):
            lab.exec(n2, "sysctl", "-qw", setting)
        lab.start_all()
        lab.wait_reachable(60)
        far = [str(lab.status(n3)[key]) for key in ("node_address", "node_address_v4")]
        cable = [c["peer"] for c in lab.status(n2)["addresses_v4"] if c["interface"] == "v2x3"]
        near = [str(lab.status(n2)[key]) for key in ("node_address", "node_address_v4")]
        until(lambda: all(probe.ping(n1, a) for a in far), what="n1 reaches n3 through n2")
        for prefix, via in (("fde0:20c6:1fa7::/48", "fd99:1::2"), ("10.77.0.0/16", "192.168.77.2")):
            netns.run("ip", "-n", lan, "route", "add", prefix, "via", via)
        lab.exec(n2, "ip", "addr", "add", "fd99:1::2/64", "dev", "lan0", "nodad")
        until(lambda: pings(lan, near[0]), what="the LAN reaches n2 itself")  # its own: delivered
        assert pings(lan, near[1])
        before = echoes(n3.netns)
        for address in [*far, *cable]:
            assert not pings(lan, address), f"the LAN reached {address} through n2"
        assert echoes(n3.netns) == before, "echo requests from the LAN arrived at n3"
        assert all(probe.ping(n1, a) for a in far)  # the mesh still crosses n2
        assert echoes(n3.netns) > before
        # and the mesh does not reach the LAN through n2, with a route that says so
        hop = next(c["peer"] for c in lab.status(n1)["addresses_v4"] if c["interface"] == "v1x2")
        lab.exec(n1, "ip", "route", "add", "192.168.77.0/24", "via", hop)
        lab.exec(n1, "ip", "route", "add", "fd99:1::1", "via", str(lab.status(n2)["node_address"]))
        before = echoes(lan)
        assert not probe.ping(n1, "192.168.77.1") and not probe.ping(n1, "fd99:1::1")
        assert echoes(lan) == before, "echo requests from the mesh arrived in the LAN"
        assert probe.ping(n1, "192.168.77.2")  # n2's own LAN address: n2 answers itself
        shown = lab.exec(n2, "ip", "-6", "route", "show", "table", str(TABLE)).stdout
        assert (
            far[0] in shown
            and not lab.exec(n2, "ip", "-6", "route", "show", "proto", "babel").stdout
        )
    finally:
        netns.delete_namespaces([lan])
