"""Links preferred by speed: three nodes on a line of fast links (veth reports 10 Gb/s:
cost 32) that also share a set of slow links (cost 128 by --cost). The direct fast link
and the 2-hop fast path win; a fast link taken down moves traffic to the slow one, and it
comes back when the fast link returns."""

from __future__ import annotations

import time
from typing import Any

import pytest

from babbler.lab import Lab, Node
from tests.integration.helpers import WAIT, LabFactory, until

pytestmark = pytest.mark.integration
SLOW = ["--interface", "s*", "--cost", "s*=128"]


def route_to(lab: Lab, source: Node, address: str) -> dict[str, Any] | None:
    routes: list[dict[str, Any]] = lab.status(source)["routes"]
    return next((r for r in routes if r["prefix"] == f"{address}/128" and r["installed"]), None)


def via(lab: Lab, source: Node, address: str) -> str | None:
    route = route_to(lab, source, address)
    return f"{route['interface']}:{route['metric']}" if route else None


def test_fast_links_win_and_the_slow_link_takes_over_while_one_is_down(
    make_lab: LabFactory,
) -> None:
    lab = make_lab(3, "line", False, *SLOW)
    for a, b in ((1, 2), (2, 3), (1, 3)):
        lab.add_link(a, b, prefix="s")
    lab.start_all()
    lab.wait_reachable(WAIT)
    n1, n2, n3 = lab.nodes
    to_n2, to_n3 = lab.status(n2)["node_address"], lab.status(n3)["node_address"]
    costs = {i["name"]: i["cost"] for i in lab.status(n1)["interfaces"]}
    assert costs == {"v1x2": 32, "s1x2": 128, "s1x3": 128}
    until(lambda: via(lab, n1, to_n2) == "v1x2:32", what="n2 over the direct fast link")
    until(lambda: via(lab, n1, to_n3) == "v1x2:64", what="n3 over two fast hops")

    down = time.monotonic()
    assert lab.exec(n1, "ip", "link", "set", "v1x2", "down").returncode == 0
    until(lambda: via(lab, n1, to_n2) == "s1x2:128", what="n2 over the slow link")
    until(lambda: lab.ping(n1, to_n2, wait=0.5), what="n2 answers over the slow link")
    moved = time.monotonic() - down
    until(lambda: via(lab, n1, to_n3) == "s1x3:128", what="n3 over its slow link")

    up = time.monotonic()
    assert lab.exec(n1, "ip", "link", "set", "v1x2", "up").returncode == 0
    until(lambda: via(lab, n1, to_n2) == "v1x2:32", what="back on the fast link")
    back = time.monotonic() - up
    until(lambda: via(lab, n1, to_n3) == "v1x2:64")
    assert lab.ping(n1, to_n3)
    print(f"\nfast link down -> on the slow link {moved:.2f} s; up -> back {back:.2f} s")
