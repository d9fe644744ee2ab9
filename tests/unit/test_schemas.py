"""The schemas themselves: valid JSON Schema, strict enough to catch a broken status, and
every JSON example in the docs matches its schema."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.schemas import check_node_info, check_status, check_watch

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```json\n(.*?)^```", re.MULTILINE | re.DOTALL)

# MLX's hostfiles are MLX's formats, not babbler's (no file in docs/schema): what
# `mlx.launch` reads, as core/mlxfile.py writes it.
HOST = {
    "type": "object",
    "required": ["ssh", "ips"],
    "properties": {
        "ssh": {"type": "string"},
        "ips": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        "rdma": {  # a device, null, or (jaccl-ring's parallel cables) a list of devices
            "type": "array",
            "items": {
                "anyOf": [
                    {"type": ["string", "null"]},
                    {"type": "array", "items": {"type": "string"}, "minItems": 2},
                ]
            },
        },
    },
    "additionalProperties": False,
}
MLX_RING = {"type": "array", "items": HOST, "minItems": 2}
JACCL = {
    "type": "object",
    "required": ["backend", "envs", "hosts"],
    "properties": {
        "backend": {"enum": ["jaccl", "jaccl-ring"]},
        "envs": {"type": "array"},
        "hosts": {"type": "array", "items": {**HOST, "required": ["ssh", "ips", "rdma"]}},
    },
    "additionalProperties": False,
}


def _check(schema: dict[str, Any]) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        jsonschema.Draft202012Validator(schema).validate(value)

    return check


COUNTERS = json.loads((ROOT / "docs" / "schema" / "counters.schema.json").read_text())
STATUS_EXAMPLE = ("protocol.md", "`status`")
# (page, section) -> what its JSON example must match
SCHEMA_OF: dict[tuple[str, str], Callable[[Any], None]] = {
    STATUS_EXAMPLE: check_status,
    ("protocol.md", "Node info (between nodes)"): check_node_info,
    ("protocol.md", "`counters`"): _check(COUNTERS),
    ("jobs.md", "MLX's ring backend"): _check(MLX_RING),
    ("jobs.md", "MLX's jaccl backend (Thunderbolt RDMA, macOS 26.2 and later)"): _check(JACCL),
}


def examples() -> list[tuple[str, str, str]]:
    """Every ```json block of README.md and docs/*.md: (page, its section, the text)."""
    out = []
    for doc in DOCS:
        text = doc.read_text()
        for match in FENCE.finditer(text):
            headings = re.findall(r"^## (.+)$", text[: match.start()], re.MULTILINE)
            out.append((doc.name, headings[-1] if headings else "", match.group(1)))
    return out


def documented_status() -> dict[str, Any]:
    [status] = [json.loads(t) for page, at, t in examples() if (page, at) == STATUS_EXAMPLE]
    assert isinstance(status, dict)
    return status


@pytest.mark.parametrize(("page", "section", "text"), examples())
def test_every_json_example_in_the_docs_matches_its_schema(
    page: str, section: str, text: str
) -> None:
    check = SCHEMA_OF.get((page, section))
    assert check, f"docs: a JSON example in {page}, '{section}', has no schema in SCHEMA_OF"
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        pytest.fail(f"{page}, '{section}': the example is not JSON: {error}")
    check(value)


def test_every_schema_has_its_example() -> None:
    found = {(page, section) for page, section, _ in examples()}
    assert set(SCHEMA_OF) <= found, f"examples gone from the docs: {set(SCHEMA_OF) - found}"


def test_the_documented_example_matches() -> None:
    status = documented_status()
    check_status(status)
    check_watch({"type": "snapshot", "status": status})
    check_watch({"type": "node", "action": "up", "node": status["nodes"][0]})
    check_watch({"type": "mesh", "mesh": "restarting"})


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("mesh",), "sleeping"),
        (("node_id",), "1A2B"),
        (("babeld", "restarts"), -1),
        (("interfaces", 0, "kind"), "wifi"),
        (("node_address",), "10.0.0.1"),
        (("nodes", 0, "cables"), None),
    ],
)
def test_a_wrong_value_is_caught(path: tuple[Any, ...], value: Any) -> None:
    broken = copy.deepcopy(documented_status())
    target: Any = broken
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(jsonschema.ValidationError):
        check_status(broken)


def test_a_missing_key_and_an_unknown_event_are_caught() -> None:
    status = documented_status()
    with pytest.raises(jsonschema.ValidationError):
        check_status({k: v for k, v in status.items() if k != "keyed"})
    with pytest.raises(jsonschema.ValidationError):
        check_watch({"type": "route", "action": "move", "route": {}})
