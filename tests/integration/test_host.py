"""babblerd harms nothing else on its host: the middle node of a line also has an uplink
whose default route comes from router advertisements (radvd in a LAN namespace), and keeps
it through start, running, a babeld SIGKILL and stop; IPv4 crosses it without ip_forward."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from babbler.lab import Lab, Node, netns, probe
from tests.integration.helpers import LabFactory, until
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
# still there after 12 s means the node still takes the RAs that follow.
RA_LIFETIME = 9.0


def sysctl(lab: Lab, node: Node, name: str) -> str:
    return lab.exec(node, "sysctl", "-n", name).stdout.strip()


def default_route(lab: Lab, node: Node) -> str:
    return lab.exec(node, "ip", "-6", "route", "show", "default").stdout.strip()


def test_an_ra_learned_default_route_survives_and_ipv4_needs_no_ip_forward(
    make_lab: LabFactory, tmp_path: Path
) -> None:
    radvd = tool("radvd", "radvd")
    lab = make_lab(3, "line", False)  # n1 - n2 - n3; n2 also has an uplink
    n1, n2, n3 = lab.nodes
    lan = f"{n2.netns}-lan"
    netns.add_namespace(lan)
    served: subprocess.Popen[bytes] | None = None
    try:
        pair = ["lan0", "netns", n2.netns, "type", "veth", "peer", "name", "up0"]
        netns.run("ip", "link", "add", *pair, "netns", lan)
        netns.run("ip", "-n", n2.netns, "link", "set", "lan0", "up")
        netns.run("ip", "-n", lan, "link", "set", "up0", "up")
        netns.run("ip", "-n", lan, "addr", "add", "fd99:1::1/64", "dev", "up0")
        netns.run("ip", "netns", "exec", lan, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1")
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
        time.sleep(RA_LIFETIME + 3)  # RAs must keep refreshing it
        assert "via fe80" in default_route(lab, n2), "running: the RAs were ignored"
        babeld = int((n2.run_dir / "private" / "babeld.pid").read_text())
        os.kill(babeld, signal.SIGKILL)
        until(lambda: lab.status(n2)["babeld"]["pid"] not in (None, babeld), what="new babeld")
        assert "via fe80" in default_route(lab, n2), "babeld killed: the default route went"
        os.kill(n2.pid or 0, signal.SIGTERM)
        lab.wait_exit(n2)
        assert sysctl(lab, n2, "net.ipv6.conf.lan0.accept_ra") == "1"  # put back
        assert sysctl(lab, n2, "net.ipv6.conf.all.forwarding") == "0"
        assert "via fe80" in default_route(lab, n2), "stopped: the default route went"
    finally:
        if served is not None:
            served.terminate()
            served.wait(timeout=10)
        netns.delete_namespaces([lan])
