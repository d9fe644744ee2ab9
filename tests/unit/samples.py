"""Sample values the unit tests share: the facts a daemon gathers, and a status object
with every contract key (made up for the tests; the example docs/protocol.md shows is
checked against the schema from the page itself, tests/unit/test_schemas.py)."""

from __future__ import annotations

from dataclasses import replace
from ipaddress import IPv6Address
from typing import Any

from babbler.client import Status, parse_status
from babbler.core import views
from babbler.core.links import Link, Selector
from tests.unit.recorded import RECORDED, table_of

NODE = 0x1A2B3C4D5E6F
MINE = IPv6Address("fde0:20c6:1fa7:ffff:1a2b:3c4d:5e6f:1")
OTHERS = IPv6Address("fde0:20c6:1fa7:ffff:aaaa:bbbb:cccc:1")
NODE_ADDRESS = IPv6Address("fde0:20c6:1fa7:ffff:1a2b:3c4d:5e6f:0")


def facts(**changes: object) -> views.Facts:
    base = views.Facts(
        version="0.1.0",
        node_id=NODE,
        node_id_source="file",
        node_id_persist_error=None,
        mode="always",
        mesh="running",
        babeld={"pid": 7, "version": "babeld-1.12.1", "restarts": 0},
        links={
            "v1x2": Link(
                "v1x2",
                2,
                kind="veth",
                up=True,
                link_local=True,
                addresses=frozenset({MINE, OTHERS}),
                speed_mbps=10000,
            ),
            "eth0": Link("eth0", 3, has_device=True, up=True, link_local=True),
            "lo": Link("lo", 1, arp_type=772, up=True, addresses=frozenset({NODE_ADDRESS})),
        },
        selector=Selector(interface=("v*",)),
        told=frozenset({"v1x2"}),
        table=table_of(*RECORDED[:5]),
        clients=2,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


INTERFACE_ENTRY: dict[str, Any] = {
    "name": "eth1",
    "kind": "ethernet",
    "up": True,
    "babel": True,
    "speed_mbps": 10000,
    "cost": 32,
}


STATUS: dict[str, Any] = {
    "version": "0.1.0",
    "node_id": "1a2b3c4d5e6f",
    "range": "fde0:20c6:1fa7:ffff:1a2b:3c4d:5e6f:0/112",
    "mode": "always",
    "mesh": "running",
    "babeld": {
        "pid": 123,
        "version": "babeld-1.12.1",
        "restarts": 0,
        "my_id": "02:9a:00:00:00:00:00:01",
        "last_error": None,
        "found": True,
    },
    "addresses": [{"interface": "eth1", "address": "fde0:20c6:1fa7:ffff:1a2b:3c4d:5e6f:1"}],
    "node_address": "fde0:20c6:1fa7:ffff:1a2b:3c4d:5e6f:0",
    "interfaces": [INTERFACE_ENTRY],
    "neighbours": [],
    "routes": [],
    "xroutes": [],
    "clients": 2,
    "node_id_source": "file",
    "node_id_persist_error": None,
    "keyed": False,
    "unmatched_globs": [],
    "name": "n1",
    "nodes": [],
    "ipv4_prefix": "10.77.0.0/16",
    "node_address_v4": "10.77.44.75",
    "ipv4_problem": None,
    "addresses_v4": [{"interface": "eth1", "address": "10.77.168.98", "peer": "10.77.168.99"}],
    "kernel_problem": None,
    "platform": "linux",
}

NODE_ENTRY: dict[str, Any] = {
    "node_id": "aaaabbbbcccc",
    "name": "n2",
    "node_address": "fde0:20c6:1fa7:ffff:aaaa:bbbb:cccc:0",
    "node_address_v4": "10.77.98.201",
    "reachable": True,
    "metric": 32,
    "interface": "eth1",
    "via": "fe80::2",
    "version": "0.1.0",
    "info": {},
    "info_age_s": 1.0,
    "error": None,
    "hops": 1,
    "neighbours": [],
    "links": [],
}
NEIGHBOUR_ENTRY: dict[str, Any] = {
    "address": "fe80::2",
    "interface": "eth1",
    "reach": "ffff",
    "rxcost": 32,
    "txcost": 32,
    "cost": 32,
    "rtt": None,
    "node_id": None,
}


def typed(partial: dict[str, Any]) -> Status:
    """A Status from a partial status: every key it lacks, in it and in its entries, taken
    from the samples above. The dict stays the test's own (raw is a merged copy)."""
    status = {**STATUS, **partial}
    status["interfaces"] = [{**INTERFACE_ENTRY, **i} for i in status["interfaces"]]
    status["neighbours"] = [{**NEIGHBOUR_ENTRY, **n} for n in status["neighbours"]]
    status["nodes"] = [
        {
            **NODE_ENTRY,
            **n,
            "links": [{**INTERFACE_ENTRY, **link} for link in n.get("links", [])],
        }
        for n in status["nodes"]
    ]
    return parse_status(status)
