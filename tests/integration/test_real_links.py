"""Links as cables behave: duplicate address detection on (the kernel's defaults, which the
lab turns off), links that appear down. babblerd turns DAD off on the links it would use
before they come up, so a plugged cable's link-local is usable at once; Thunderbolt links
(here `--bring-up 'v*'`) come up by themselves and go down again at stop."""

from __future__ import annotations

import os
import signal

import pytest

from babbler.lab import Lab, Node, netns
from tests.integration.helpers import WAIT, LabFactory, sysctl, until

pytestmark = pytest.mark.integration


def as_cables(lab: Lab) -> None:
    """The kernel's DAD defaults back (all 0, default 1, each link 1), every link down: what
    `babbler-lab up --real-links` makes (test_real_links_lab checks that it does)."""
    for node in lab.nodes:
        settings = ["net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=1"]
        settings += [f"net.ipv6.conf.{link}.accept_dad=1" for link in links_of(lab, node)]
        lab.exec(node, "sysctl", "-qw", *settings)
        for link in links_of(lab, node):
            lab.exec(node, "ip", "link", "set", link, "down")


def links_of(lab: Lab, node: Node) -> list[str]:
    shown = lab.exec(node, "ip", "-o", "link", "show").stdout.split("\n")
    return [line.split(":")[1].strip().split("@")[0] for line in shown if ": v" in line]


def test_a_plugged_cable_has_a_usable_link_local_at_once(make_lab: LabFactory) -> None:
    lab = make_lab(2, "line", False)
    n1, n2 = lab.nodes
    as_cables(lab)
    lab.start_all()
    until(lambda: sysctl(lab, n1, "net.ipv6.conf.v1x2.accept_dad") == "0", what="DAD off")
    for node, link in ((n1, "v1x2"), (n2, "v2x1")):  # the cable is plugged in
        netns.run("ip", "-n", node.netns, "link", "set", link, "up")
    shown = lab.exec(n1, "ip", "-6", "addr", "show", "dev", "v1x2", "scope", "link").stdout
    assert "fe80" in shown and "tentative" not in shown, shown  # not ~1-3 s of DAD first
    lab.wait_reachable(WAIT)
    os.kill(n1.pid or 0, signal.SIGTERM)
    lab.wait_exit(n1)
    assert sysctl(lab, n1, "net.ipv6.conf.v1x2.accept_dad") == "1"  # put back
    assert "state UP" in lab.exec(n1, "ip", "link", "show", "v1x2").stdout  # not ours: stays


def test_links_that_appear_down_are_brought_up_once_and_put_down_at_stop(
    make_lab: LabFactory,
) -> None:
    lab = make_lab(2, "line", False)
    n1, n2 = lab.nodes
    as_cables(lab)
    for node in lab.nodes:
        lab.start(node, ["--bring-up", "v*"])  # what Thunderbolt links get by default
    lab.wait_reachable(WAIT)
    shown = {i["name"]: i["brought_up"] for i in lab.status(n1)["interfaces"]}
    assert shown == {"v1x2": True}
    lab.exec(n2, "ip", "link", "set", "v2x1", "down")  # someone takes it down: it stays
    until(lambda: not lab.status(n2)["interfaces"][0]["brought_up"], what="n2 lets it go")
    assert "state DOWN" in lab.exec(n2, "ip", "link", "show", "v2x1").stdout
    os.kill(n1.pid or 0, signal.SIGTERM)
    lab.wait_exit(n1)
    assert "state DOWN" in lab.exec(n1, "ip", "link", "show", "v1x2").stdout  # as found


def test_real_links_lab_has_the_kernels_dad_and_links_down_until_plugged() -> None:
    lab = Lab.create(f"rl{os.getpid() % 10000}", 2, "line", ["--mode", "always"], True)
    try:
        n1 = lab.nodes[0]
        assert sysctl(lab, n1, "net.ipv6.conf.v1x2.accept_dad") == "1"
        assert "state DOWN" in lab.exec(n1, "ip", "link", "show", "v1x2").stdout
        lab.plug_all()
        assert "DOWN" not in lab.exec(n1, "ip", "link", "show", "v1x2").stdout.split(">")[0]
        shown = lab.exec(n1, "ip", "-6", "addr", "show", "dev", "v1x2").stdout
        assert "tentative" in shown, shown  # no babblerd: DAD as on a machine
    finally:
        lab.down()
