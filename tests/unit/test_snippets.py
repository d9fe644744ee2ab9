"""The README's and docs/client.md's Python snippets compile as they stand (a top-level
`async for` does not), the doc's example is the example program's own code, and the example
says a node in the down hold has no route rather than "metric None via None"."""

from __future__ import annotations

import ast
import importlib.util
from types import ModuleType

import pytest

from babbler.client.model import parse_node
from tests.snippets import EXAMPLE, PAGES, python_snippets

NODE = {
    "node_id": "3b7c8774b3fc",
    "name": "n3",
    "node_address": "fde0:20c6:1fa7:ffff:3b7c:8774:b3fc:0",
    "reachable": True,
    "metric": 64,
    "interface": "v1x4",
    "via": "fe80::1",
    "route_lost_s": None,
    "last_seen_s": None,
    "version": "0.1",
    "info": {},
    "info_age_s": 1.0,
    "error": None,
    "neighbours": [],
    "links": [],
}


def example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("watch_nodes", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_page_has_python_snippets() -> None:
    pages = {where.partition(":")[0] for where, _ in python_snippets()}
    assert pages == {"README.md", "docs/client.md"}, pages


@pytest.mark.parametrize(("where", "code"), python_snippets(), ids=lambda x: str(x)[:40])
def test_a_python_snippet_compiles_as_it_stands(where: str, code: str) -> None:
    try:
        compile(code, where, "exec")
    except SyntaxError as error:
        pytest.fail(f"{where}: the snippet does not run as written: {error}")


def test_the_client_doc_s_example_is_the_example_program_s_code() -> None:
    """What docs/client.md shows of examples/watch_nodes.py is in it word for word."""
    program = EXAMPLE.read_text()
    [shown] = [code for where, code in python_snippets() if "def follow" in code]
    functions = [
        node
        for node in ast.parse(shown).body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    ]
    assert {f.name for f in functions} == {"where", "follow"}
    for function in functions:
        text = ast.get_source_segment(shown, function)
        assert text is not None and text in program, f"{PAGES[1].name}: {function.name} differs"


def test_the_example_says_a_node_in_the_down_hold_has_no_route() -> None:
    where = example().where
    assert where(parse_node(NODE)) == "metric 64 via v1x4"
    held = {**NODE, "metric": None, "interface": None, "via": None, "route_lost_s": 0.2}
    assert where(parse_node(held)) == (
        "no route now: down unless one comes back within the down hold"
    )
    gone = {**held, "reachable": False, "route_lost_s": None, "last_seen_s": 3.0}
    assert where(parse_node(gone)) == "unreachable"
