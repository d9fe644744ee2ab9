"""Fuzzing what other nodes answer: random JSON, near-valid answers with a field or two
made hostile (wrong types, huge or non-finite numbers, control characters, deep nesting),
and raw bytes, each through everything an answer reaches: the checker, the node book (the
answer, `status.nodes`, `watch` events), the MTU of cables, the status and nodes tables,
the path, the graph's DOT, `watch` lines, the doctor, and every hostfile format. Nothing may
raise but a refusal, and nothing shown or written may hold a character a terminal acts on.
Budget: a quarter of FUZZ_EXAMPLES (default 2,000) examples."""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import event as note
from hypothesis import strategies as st

from babbler.client.model import NodeEvent, Snapshot, parse_node, parse_status
from babbler.core import hostfile, jobenv, mlxfile, mtu
from babbler.core.addressing import format_node_id
from babbler.core.cablegraph import CableGraph
from babbler.core.errors import BabblerError
from babbler.core.farend import far_ends
from babbler.core.graph import Graph, to_dot
from babbler.core.printable import UNSAFE_CATEGORIES, first_unsafe
from babbler.daemon.nodes.book import NodeBook, events
from babbler.daemon.nodes.checked import BadInfo, parse
from babbler.ui.doctor import Facts, checks, render_checks
from babbler.ui.render import render_nodes, render_path, render_status
from babbler.ui.watchview import WatchView
from tests.unit.recorded import table_of
from tests.unit.samples import STATUS
from tests.unit.test_nodes import route

BUDGET = settings(
    max_examples=max(50, int(os.environ.get("FUZZ_EXAMPLES", "2000")) // 4),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],  # no
    # "explain": it took minutes over a failure of this many steps
)
ME = int(STATUS["node_id"], 16)
NODES = (0xA, 0xB, 0xC)

# Text of any character, those a terminal acts on and lone surrogates included.
any_text = st.text(st.characters(exclude_categories=()), max_size=20)
hostile_text = st.sampled_from(
    ["\x1b[2J", "\x1b]0;t\x07", "a\nb", "\u202e", "\x9b", "\ud800", "fe80::1%\x1b", "", "/"]
)
scalars = st.none() | st.booleans() | st.integers() | st.floats() | any_text | hostile_text
trees = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(any_text, inner, max_size=4),
    max_leaves=12,
)
# Raw answers json.dumps never writes (or cannot: 5,000 digits), by name (a short repr).
RAW = {
    "5,000 digits": b'{"node_id": "%s", "uptime_s": ' + b"9" * 5000 + b"}",
    "5,000 deep": b'{"node_id": "%s", "info": ' + b"[" * 5000 + b"]" * 5000 + b"}",
    "NaN": b'{"node_id": "%s", "uptime_s": NaN}',
    "-Infinity": b'{"node_id": "%s", "uptime_s": -Infinity}',
    "1e400": b'{"node_id": "%s", "uptime_s": 1e400}',
    "ESC": b'{"node_id": "%s", "name": "\\u001b[2J"}',
    "surrogate": b'{"node_id": "%s", "name": "\\ud800"}',
    "trailing": b'{"node_id": "%s", "name": "a"} trailing',
}

# Values that pass the checker, so that the book and the renderers get strange but valid
# answers: any printable text, names at their limits, numbers across their ranges.
SAFE = st.characters(exclude_categories=("Cc", "Cf", "Cs", "Zl", "Zp"))
assert {"Cc", "Cf", "Cs", "Zl", "Zp"} == UNSAFE_CATEGORIES  # the categories SAFE leaves out
printable_text = st.text(SAFE, max_size=64)
node_ids = st.sampled_from([format_node_id(n) for n in (ME, *NODES)] + ["0123456789ab"]) | st.none()
links = st.from_regex(r"[A-Za-z0-9_.-]{1,15}", fullmatch=True).filter(
    lambda n: n not in (".", "..")
)
v4 = st.ip_addresses(v=4).map(str)
v6 = st.ip_addresses(v=6).map(str)
sizes = st.none() | st.integers(0, 65535)
devices = st.from_regex(r"rdma_[A-Za-z0-9_.-]{1,15}", fullmatch=True)
rdma = st.none() | st.fixed_dictionaries(  # a Mac's (core/rdma.py), as checked.py takes it
    {
        "ready": st.booleans(),
        "macos": st.none() | st.from_regex(r"[0-9]{1,3}(\.[0-9]{1,3}){0,2}", fullmatch=True),
        "rdma_ctl": st.none() | printable_text.filter(bool),
        "devices": st.lists(devices, max_size=3),
        "cables": st.lists(
            st.fixed_dictionaries(
                {
                    "interface": links,
                    "speed_gbps": st.none() | st.integers(0, 10_000) | st.floats(0, 10_000),
                    "thunderbolt": st.none() | st.integers(1, 99),
                    "device": st.none() | devices,
                }
            ),
            max_size=3,
        ),
    }
)
valid = st.fixed_dictionaries(
    {
        "name": printable_text.filter(bool) | st.none(),
        "version": printable_text.filter(bool).map(lambda t: t[:64]) | st.none(),
        "uptime_s": st.none() | st.floats(0, 1e9) | st.integers(0, 10**9),
        "node_address": v6,
        "interfaces": st.lists(
            st.fixed_dictionaries(
                {
                    "name": links,
                    "kind": st.sampled_from(["ethernet", "thunderbolt", "other", "x"]),
                    "speed_mbps": st.none() | st.integers(0, 10**7),
                    "cost": st.none() | st.integers(1, 65534),
                    "mtu": sizes,
                    "max_mtu": sizes,
                }
            ),
            max_size=4,
        ),
        "neighbours": st.lists(
            st.fixed_dictionaries(
                {"node_id": node_ids, "interface": links | st.none(), "address": v6 | st.none()}
            ),
            max_size=4,
        ),
        "info": st.dictionaries(
            printable_text.filter(bool),
            printable_text
            | st.integers(-(10**18), 10**18)
            | st.floats(allow_nan=False, allow_infinity=False)
            | st.booleans(),
            max_size=4,
        ),
        "node_address_v4": v4 | st.none(),
        "cables": st.lists(
            st.fixed_dictionaries({"interface": links, "address": v4, "peer": v4}), max_size=4
        ),
        "rdma": rdma,
    }
)
# Where a corruption goes: a top-level key, or a field of a list's first item.
PLACES = [
    *[(key,) for key in ("node_id", "name", "version", "uptime_s", "node_address", "info")],
    *[(key,) for key in ("node_address_v4", "interfaces", "neighbours", "cables", "truncated")],
    ("rdma",),
    ("interfaces", "name"), ("interfaces", "cost"), ("interfaces", "max_mtu"),
    ("neighbours", "node_id"), ("neighbours", "address"), ("cables", "peer"), ("info", "role"),
]  # fmt: skip


def corrupted(answer: dict[str, Any], where: tuple[str, ...], value: Any) -> dict[str, Any]:
    if len(where) == 1:
        return {**answer, where[0]: value}
    key, field = where
    inside = answer[key]
    if key == "info":
        return {**answer, "info": {**(inside if isinstance(inside, dict) else {}), field: value}}
    items = inside if isinstance(inside, list) and inside and isinstance(inside[0], dict) else [{}]
    return {**answer, key: [{**items[0], field: value}, *items[1:]]}


def answers(node: int) -> st.SearchStrategy[bytes]:
    """What `node` might answer: valid, valid but for a field or two, random, raw."""
    ident = format_node_id(node)
    mutations = st.lists(st.tuples(st.sampled_from(PLACES), trees), max_size=2)

    def made(answer: dict[str, Any], changes: list[tuple[tuple[str, ...], Any]]) -> bytes:
        answer = {"node_id": ident, **answer}
        for where, value in changes:
            answer = corrupted(answer, where, value)
        return json.dumps(answer).encode()

    return st.one_of(
        st.builds(made, valid, mutations),
        trees.map(lambda tree: json.dumps(tree).encode()),
        st.binary(max_size=64),
        st.sampled_from(sorted(RAW)).map(lambda name: RAW[name].replace(b"%s", ident.encode())),
    )


def shown(text: str) -> None:
    """Text a terminal gets: nothing it acts on but the renderer's own line breaks."""
    for line in text.split("\n"):
        assert first_unsafe(line.replace("\t", " ")) is None, repr(line)


@BUDGET
@given(st.tuples(*(answers(node) for node in NODES)))
def test_any_answers_reach_no_output_raw_and_raise_nothing(datas: tuple[bytes, ...]) -> None:
    book = NodeBook(ME)
    book.update_routes([route(node, 32 * (i + 1)) for i, node in enumerate(NODES)], now=0.0)
    views = [book.view(0.0)]
    for node, data in zip(NODES, datas, strict=True):
        book.asking(node, 0.0)
        try:
            info = parse(data)
        except BadInfo as error:  # the node's `error`: one line, nothing raw
            assert "\n" not in str(error) and len(str(error)) < 200
            shown(str(error))
            book.failed(node, f"bad node info: {error}")
            note(f"refused: {str(error).partition(':')[0]}")
        else:
            note("answer taken")
            if info["node_id"] == format_node_id(node):
                book.answered(node, info, 1.0)
        views.append(book.view(1.0))
        book.next_due()
    happened = [e for before, after in itertools.pairwise(views) for e in events(before, after)]

    infos = [(format_node_id(k.node_id), k.info) for k in book.nodes.values() if k.info]
    eth1 = table_of("add interface eth1 up true ipv6 fe80::1")
    mtu.far_offers(far_ends(eth1, infos, STATUS["node_id"]), dict(infos))

    raw = {**STATUS, "nodes": views[-1]}
    status = parse_status(json.loads(json.dumps(raw)))  # as a client reads it
    shown(render_status(status, routes=True))
    shown("\n".join(render_nodes(status)))
    for other in status.nodes:
        try:
            shown(render_path(status, other.node_id))
        except BabblerError as error:
            shown(str(error))
    shown(to_dot(Graph.from_status(status.raw)))

    watch = WatchView()
    shown("\n".join(watch.lines(Snapshot(status))))
    for event in happened:
        shown("\n".join(watch.lines(NodeEvent(event["action"], parse_node(event["node"])))))
    shown(render_checks(checks(Facts(platform="Linux", root=True, socket="s", status=status))))

    graph = CableGraph.from_status(status.raw)
    writers: list[tuple[bool, Callable[[], hostfile.Hostfile]]] = [
        (True, lambda: mlxfile.mlx(graph, None, allow_hops=True, by_name=True)),
        (True, lambda: mlxfile.jaccl(graph, None, by_name=False)),
        (True, lambda: mlxfile.jaccl_ring(graph, None, by_name=True)),
        (True, lambda: mlxfile.auto(graph, None, allow_hops=False, by_name=False)),
        (False, lambda: hostfile.torch(graph, None, hostfile.TORCH_PORT, this=True)),
        (False, lambda: jobenv.env(graph, None, hostfile.TORCH_PORT, "lo:babbler")),
        (False, lambda: jobenv.llama_rpc(graph, None, jobenv.LLAMA_RPC_PORT)),
        (False, lambda: hostfile.hosts_lines(graph, ["n1"])),
    ]
    for as_json, write in writers:
        try:
            made = write()
        except BabblerError as error:
            shown(str(error))
            continue
        # As babblerctl writes them; the tab is the hosts lines' own.
        shown(json.dumps(made.value, indent=2) if as_json else "\n".join(made.value))
        for warning in made.warnings + made.notes:
            shown(warning)
