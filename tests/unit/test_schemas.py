"""The schemas themselves: valid JSON Schema, and strict enough to catch a broken status."""

from __future__ import annotations

import copy
from typing import Any

import jsonschema
import pytest

from tests.schemas import check_status, check_watch

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
    "interfaces": [
        {
            "name": "eth1",
            "kind": "ethernet",
            "up": True,
            "babel": True,
            "speed_mbps": 10000,
            "cost": 32,
        }
    ],
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
}


def test_the_documented_example_matches() -> None:
    check_status(STATUS)
    check_watch({"type": "snapshot", "status": STATUS})
    check_watch({"type": "mesh", "mesh": "restarting"})


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("mesh",), "sleeping"),
        (("node_id",), "1A2B"),
        (("babeld", "restarts"), -1),
        (("interfaces", 0, "kind"), "wifi"),
        (("node_address",), "10.0.0.1"),
    ],
)
def test_a_wrong_value_is_caught(path: tuple[Any, ...], value: Any) -> None:
    broken = copy.deepcopy(STATUS)
    target: Any = broken
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(jsonschema.ValidationError):
        check_status(broken)


def test_a_missing_key_and_an_unknown_event_are_caught() -> None:
    with pytest.raises(jsonschema.ValidationError):
        check_status({k: v for k, v in STATUS.items() if k != "keyed"})
    with pytest.raises(jsonschema.ValidationError):
        check_watch({"type": "route", "action": "move", "route": {}})
