"""The schemas themselves: valid JSON Schema, and strict enough to catch a broken status."""

from __future__ import annotations

import copy
from typing import Any

import jsonschema
import pytest

from tests.schemas import check_status, check_watch
from tests.unit.samples import STATUS


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
