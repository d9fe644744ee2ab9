"""Both ends of every cable run the largest MTU they share (`--mtu auto|N`): learned from the
far end's node info, applied without losing babeld's neighbour, and large frames that do not
fragment (ping -M do) pass at that size."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from babbler.daemon.nodes.book import REFRESH
from babbler.lab import Lab, Node
from babbler.lab.jobs import babblerctl
from tests.integration.helpers import WAIT, LabFactory, until

pytestmark = pytest.mark.integration

IPV6_ICMP_HEADERS = 48  # what a ping adds to its payload: IPv6 40, ICMPv6 8


def mtu(lab: Lab, node: Node, link: str) -> int:
    return int(lab.exec(node, "cat", f"/sys/class/net/{link}/mtu").stdout)


def far_link_local(lab: Lab, node: Node, link: str) -> str:
    """The address of babeld's neighbour on `link` (the far end of that cable)."""
    found = [n["address"] for n in lab.status(node)["neighbours"] if n["interface"] == link]
    assert len(found) == 1, lab.status(node)["neighbours"]
    return str(found[0])


def whole_ping(lab: Lab, node: Node, link: str, size: int) -> bool:
    """A ping of `size` bytes on the wire, across one cable, that may not be fragmented."""
    target = f"{far_link_local(lab, node, link)}%{link}"
    payload = str(size - IPV6_ICMP_HEADERS)
    ping = ["ping", "-c", "2", "-i", "0.2", "-W", "2", "-M", "do", "-s", payload, target]
    return lab.exec(node, *ping).returncode == 0


def far_link(lab: Lab, node: Node) -> tuple[int, int] | None:
    """(mtu, max_mtu) of the other node's one link, as its node info says them."""
    (far,) = lab.status(node)["nodes"]
    return (far["links"][0]["mtu"], far["links"][0]["max_mtu"]) if far["links"] else None


def reach_bits(lab: Lab, node: Node, link: str) -> int:
    """Hellos heard of the last 16 from the neighbour on `link` (babeld's reach)."""
    reach = [n["reach"] for n in lab.status(node)["neighbours"] if n["interface"] == link]
    return bin(int(reach[0], 16)).count("1") if reach else 0


def test_both_ends_take_the_smaller_largest_and_follow_an_end_forced_to_1500(
    make_lab: LabFactory,
) -> None:
    lab = make_lab(2, "line", False)
    n1, n2 = lab.nodes
    lab.start(n1, ["--mtu", "9000"])  # the largest n1's end takes
    lab.start(n2, ["--mtu", "65520"])
    lab.wait_reachable(WAIT)
    until(lambda: mtu(lab, n1, "v1x2") == mtu(lab, n2, "v2x1") == 9000, what="both at 9000")
    assert whole_ping(lab, n1, "v1x2", 9000) and whole_ping(lab, n2, "v2x1", 9000)
    assert not whole_ping(lab, n1, "v1x2", 9001)  # the size is the cable's, not more
    shown = {i["name"]: (i["mtu"], i["max_mtu"]) for i in lab.status(n2)["interfaces"]}
    assert shown == {"v2x1": (9000, 65520)}  # max_mtu: what n2 offers, capped by --mtu
    until(lambda: far_link(lab, n2) == (9000, 9000), what="n1's info says its new size")

    # Someone sets one end by hand: babblerd puts the cable's size back, and the far end
    # keeps its neighbour and its route to n1 all the while. (How many hellos a change
    # costs is measured, docs/benchmarks.md "MTU": none on a quiet machine; CI's load
    # alone has cost 4 of 16 here, so the test asks only that the adjacency holds.)
    lowest, routed = 16, True
    lab.exec(n1, "ip", "link", "set", "v1x2", "mtu", "1500")
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        lowest = min(lowest, reach_bits(lab, n2, "v2x1"))
        routed = routed and all(n["reachable"] for n in lab.status(n2)["nodes"])
    assert mtu(lab, n1, "v1x2") == 9000
    assert lowest > 0 and routed, (lowest, routed)

    os.kill(n1.pid or 0, signal.SIGTERM)  # n1 comes back forced to 1500: both ends follow
    lab.wait_exit(n1)
    lab.start(n1, ["--mtu", "1500"])
    until(lambda: mtu(lab, n1, "v1x2") == mtu(lab, n2, "v2x1") == 1500, what="both at 1500")
    assert whole_ping(lab, n2, "v2x1", 1500) and not whole_ping(lab, n2, "v2x1", 1501)
    # The doctor compares with n1's picture of n2, which n1 asks 1 s after its own resize:
    # when n2 follows later than that (a loaded machine), with the next ask, at most
    # REFRESH (60 s) later. Known, left for the node-info rework (issue 33).
    until(lambda: far_link(lab, n1) == (1500, 65520), timeout=REFRESH + WAIT, what="n2's size")
    doctor = babblerctl(n1, "doctor", "--json", "--state-dir", str(n1.state_dir))
    (check,) = [c for c in json.loads(doctor.stdout) if c["check"] == "mtu"]
    assert check["status"] == "ok", check


def test_auto_sizes_thunderbolt_cables_and_leaves_the_parallel_ethernet_alone(
    make_lab: LabFactory,
) -> None:
    """Two cables between n1 and n2: a Thunderbolt one (veth named as thunderbolt-net
    names its links) rises to the largest both ends take; the other keeps 1500. Each end
    finds its own far end on each cable."""
    lab = make_lab(2, "line", False)
    n1, n2 = lab.nodes
    lab.add_link(1, 2, "thunderbolt")
    shown = lab.exec(n1, "ip", "-d", "link", "show", "thunderbolt1x2").stdout
    largest = int(shown.split("maxmtu ")[1].split()[0])  # veth's: 65535
    for node in lab.nodes:
        lab.start(node, ["--interface", "thunderbolt*"])  # --mtu auto, the default
    lab.wait_reachable(WAIT)
    cable = ((n1, "thunderbolt1x2"), (n2, "thunderbolt2x1"))
    until(
        lambda: all(mtu(lab, node, link) == largest for node, link in cable),
        what=f"the Thunderbolt cable at {largest}",
    )
    assert mtu(lab, n1, "v1x2") == mtu(lab, n2, "v2x1") == 1500  # not ours to size
    until(lambda: whole_ping(lab, n1, "thunderbolt1x2", largest), what="whole frames pass")
    assert whole_ping(lab, n1, "v1x2", 1500) and not whole_ping(lab, n1, "v1x2", 1501)
    offers = {i["name"]: i["max_mtu"] for i in lab.status(n1)["interfaces"]}
    assert offers == {"thunderbolt1x2": largest, "v1x2": 1500}  # what each end offers
