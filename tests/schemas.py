"""The JSON schemas of docs/schema, for tests that check real output against them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

SCHEMAS = Path(__file__).resolve().parent.parent / "docs" / "schema"


def _validator(name: str) -> Draft202012Validator:
    resources = []
    for path in sorted(SCHEMAS.glob("*.schema.json")):
        schema = json.loads(path.read_text())
        resource = Resource.from_contents(schema)
        resources += [(path.name, resource), (schema["$id"], resource)]
    registry: Registry[Any] = Registry().with_resources(resources)
    schema = json.loads((SCHEMAS / name).read_text())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, registry=registry)


STATUS = _validator("status.schema.json")
WATCH = _validator("watch-event.schema.json")
NODE_INFO = _validator("node-info.schema.json")


def check_status(value: Any) -> None:
    """Raises jsonschema.ValidationError naming the first thing that does not match."""
    STATUS.validate(value)


def check_watch(value: Any) -> None:
    WATCH.validate(value)


def check_node_info(value: Any) -> None:
    NODE_INFO.validate(value)
