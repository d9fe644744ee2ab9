"""`babblerctl ip` and NODE arguments on a real mesh: every address of a node, this one or
another (whose link addresses only babeld's routes say), and any of them names the node."""

from __future__ import annotations

import json
from typing import Any

from babbler.lab.jobs import babblerctl
from tests.integration.helpers import LabFactory, until


def test_ip_all_lists_every_address_and_any_address_names_the_node(
    make_lab: LabFactory,
) -> None:
    lab = make_lab(3, "line")  # n1 - n2 - n3
    n1, _, n3 = lab.nodes
    until(lambda: lab.status(n3)["node_address_v4"], what="n3's IPv4 node address")
    said = babblerctl(n3, "ip", "--json")
    assert said.returncode == 0, said.stderr
    mine = json.loads(said.stdout)
    links = {a["address"] for a in mine["addresses"]}
    cables = {c["address"] for c in mine["cables"]}
    assert len(links) == 1 and len(cables) == 1, mine  # n3 has one cable, to n2

    def seen_from_n1() -> dict[str, Any]:
        said = babblerctl(n1, "ip", "--json", "n3")  # "no node n3" (exit 1) until it is known
        answer: dict[str, Any] = json.loads(said.stdout) if said.returncode == 0 else {}
        return answer

    until(
        lambda: seen_from_n1().get("cables") and seen_from_n1().get("addresses"), what="n3's info"
    )
    assert {a["address"] for a in seen_from_n1()["addresses"]} == links
    shown = babblerctl(n1, "ip", "--all", "n3").stdout.splitlines()
    assert shown == [
        f"{mine['node_address']}  node address",
        f"{mine['node_address_v4']}  node address",  # the one jobs use
        f"{next(iter(links))}  a link of n3",
        f"{next(iter(cables))}  v3x2 (cable to {mine['cables'][0]['peer']})",
    ], shown
    for what in (next(iter(links)), next(iter(cables)), mine["node_id"].upper()):
        said = babblerctl(n1, "ip", "-4", what)
        assert said.stdout.strip() == mine["node_address_v4"], (what, said.stderr)
