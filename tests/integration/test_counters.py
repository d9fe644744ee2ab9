"""Counters per link (issue 34 item 1), on a real lab: traffic over one cable shows on that
cable's counters in `status` and in the far node's `counters` entry, the other cable's stay
small; no node asks another for counters while nobody asks `counters`, asking starts within
seconds of a request and stops within about 5 s of the last; a macOS node's counters move."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from babbler.client import Client, ask
from babbler.lab import Lab, Node
from tests.integration.conftest import macos_lab
from tests.integration.helpers import WAIT, LabFactory, stats, until

PINGS = 200
SIZE = 1000  # bytes of payload: each echo and each reply carries more than this
CARRIED = PINGS * SIZE
QUIET = CARRIED // 4  # what the other cable may carry meanwhile (hellos, node info, asks)


def link(status: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, int] = next(i for i in status["interfaces"] if i["name"] == name)["counters"]
    assert found is not None, f"{name} has no counters in {status['interfaces']}"
    return found


def entry(answer: dict[str, Any], node_id: str, name: str) -> dict[str, Any] | None:
    for node in answer["nodes"]:
        if node["node_id"] == node_id:
            return next((i for i in node["interfaces"] if i["name"] == name), None)
    return None


def viewing(node: Node, until_true: Callable[[dict[str, Any]], bool], what: str) -> dict[str, Any]:
    """Ask `counters` each second (as a view does) until `until_true(answer)`."""
    seen: dict[str, Any] = {}

    def look() -> bool:
        seen.update(ask(node.socket, "counters"))
        if until_true(seen):
            return True
        time.sleep(1.0)
        return False

    until(look, WAIT, what)
    return seen


def moved(before: dict[str, Any], after: dict[str, Any]) -> dict[str, int]:
    return {key: after[key] - before[key] for key in before if key != "name"}


def test_traffic_over_one_cable_shows_on_it_in_status_and_at_the_far_node(
    make_lab: LabFactory,
) -> None:
    lab = make_lab(3, "line")
    lab.wait_reachable(WAIT)
    n1, n2, n3 = lab.nodes
    n2_id = lab.status(n2)["node_id"]
    near, far, other = lab.end_name(1, 2), lab.end_name(2, 1), lab.end_name(2, 3)

    # nobody asked `counters`: no node asks another, whatever time passes
    asked = [stats(node)["counters_asks"] for node in lab.nodes]
    answered = [stats(node)["counters_answers"] for node in lab.nodes]
    time.sleep(5)
    assert [stats(node)["counters_asks"] for node in lab.nodes] == asked
    assert [stats(node)["counters_answers"] for node in lab.nodes] == answered

    # a viewer on n1: within a few seconds n2's counters come (n2 answered, n1 asked)
    start = time.monotonic()
    first = viewing(n1, lambda a: entry(a, n2_id, far) is not None, "n2's counters at n1")
    assert time.monotonic() - start < 10
    assert stats(n1)["counters_asks"] > asked[0] and stats(n2)["counters_answers"] > answered[1]
    own = first["nodes"][0]
    assert own["node_id"] == lab.status(n1)["node_id"] and own["age_s"] < 1
    assert {i["name"] for i in own["interfaces"]} == {near}

    before_n1, before_n2 = lab.status(n1), lab.status(n2)
    far_before = entry(first, n2_id, far)
    assert far_before is not None
    n2_address = before_n2["node_address"]  # routed from n1 over the n1-n2 cable only
    pinged = lab.exec(
        n1, "ping", "-6", "-q", "-s", str(SIZE), "-c", str(PINGS), "-i", "0.01", n2_address
    )
    assert pinged.returncode == 0, pinged.stdout + pinged.stderr
    after_n1, after_n2 = lab.status(n1), lab.status(n2)
    assert after_n1["counters_at"] > before_n1["counters_at"]

    # status: both ends of the n1-n2 cable carried it, each way
    for before, after, name in ((before_n1, after_n1, near), (before_n2, after_n2, far)):
        grew = moved(link(before, name), link(after, name))
        assert grew["rx_bytes"] >= CARRIED and grew["tx_bytes"] >= CARRIED, (name, grew)
        assert grew["rx_packets"] >= PINGS and grew["tx_packets"] >= PINGS, (name, grew)
    # the n2-n3 cable did not
    quiet = moved(link(before_n2, other), link(after_n2, other))
    assert quiet["rx_bytes"] < QUIET and quiet["tx_bytes"] < QUIET, quiet

    # n2's `counters` entry as n1 sees it moved as n2's status says (it was asked anew)
    def far_grew(answer: dict[str, Any]) -> bool:
        now = entry(answer, n2_id, far)
        return now is not None and now["rx_bytes"] - far_before["rx_bytes"] >= CARRIED

    later = viewing(n1, far_grew, "n2's cable counters grown at n1")
    grown = moved(far_before, entry(later, n2_id, far) or {})
    assert grown["tx_bytes"] >= CARRIED, grown
    n3_id = lab.status(n3)["node_id"]
    assert entry(later, n3_id, lab.end_name(3, 2)) is not None  # two hops away: asked too
    typed = Client(n1.socket).counters()  # the Python client's typed form of the same
    assert typed.nodes[0].node_id == own["node_id"]
    assert {n.node_id for n in typed.nodes} >= {n2_id, n3_id}

    # nobody asks any more: within about 5 s (VIEWER_HOLD 3 s, an ask's 2 s) no more asks
    time.sleep(6)
    settled = stats(n1)["counters_asks"]
    time.sleep(5)
    assert stats(n1)["counters_asks"] == settled
    assert [stats(n)["counters_asks"] for n in (n2, n3)] == asked[1:]  # never viewers


@pytest.fixture
def macos_line() -> Any:
    with macos_lab("k", 2, "line") as lab:
        yield lab


def test_a_macos_nodes_status_shows_counters_that_move(macos_line: Lab) -> None:
    n1, n2 = macos_line.nodes
    status = macos_line.status(n1)
    assert status["platform"] == "macos"
    cable = macos_line.end_name(1, 2)  # en2: read from the lab's `netstat -ibn`
    before = link(status, cable)
    address = macos_line.status(n2)["node_address"]
    pinged = macos_line.exec(
        n1, "ping", "-6", "-q", "-s", str(SIZE), "-c", "50", "-i", "0.01", address
    )
    assert pinged.returncode == 0, pinged.stdout + pinged.stderr
    after = macos_line.status(n1)
    grew = moved(before, link(after, cable))
    assert grew["tx_bytes"] >= 50 * SIZE and grew["rx_bytes"] >= 50 * SIZE, grew
    assert after["counters_at"] > status["counters_at"]
    # and a Linux-side viewer... the other macOS node's counters come through node info
    n2_id = macos_line.status(n2)["node_id"]
    viewing(n1, lambda a: entry(a, n2_id, macos_line.end_name(2, 1)) is not None, "n2 at n1")
