"""bench/first_minute.py --profile: each py-spy sample goes to the source of work that made it
(bench/profile_sources.py), by its stack, whoever runs the helper it was caught in."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[2] / "bench"))  # a script folder

import profile_sources as ps

ROOT = "<module> (babbler/daemon/cli.py:152);main (babbler/daemon/cli.py:140)"
TRIO = "run (trio/_core/_run.py:2300);unrolled_run (trio/_core/_run.py:2500)"
SITE = "/srv/babbler/.venv/lib/python3.11/site-packages/trio/_core/_run.py"  # not ours


def line(*frames: str, count: int = 1) -> str:
    return f"{';'.join(frames)} {count}"


def test_each_sample_goes_to_the_source_that_made_it() -> None:
    cases = {
        ps.ASKS: line(
            ROOT, TRIO, "_ask (babbler/daemon/nodes/service.py:230)",
            "answered (babbler/daemon/nodes/book.py:120)",  # taking the answer: still the ask
            "node_answered (babbler/daemon/reconcile.py:170)",
        ),
        ps.ANSWERS: line(
            TRIO, "one (/work/main/babbler/daemon/nodes/server.py:66)",
            "_answer_one (/work/main/babbler/daemon/nodes/server.py:110)",
            "_answer (/work/main/babbler/daemon/nodes/service.py:130)",
            "info_value (/work/main/babbler/daemon/view.py:170)",
            "entries (/work/main/babbler/core/table.py:90)",  # babeld's table, for an answer
        ),
        ps.BOOK: line(
            ROOT, TRIO, "run (babbler/daemon/nodes/service.py:100)",
            "_follow (babbler/daemon/nodes/service.py:160)",
            "update_routes (babbler/daemon/nodes/book.py:80)",
        ),
        ps.IPV4: line(
            TRIO, "follow_cables (babbler/daemon/reconcile.py:160)",
            "_pass (babbler/daemon/reconcile.py:200)",
            "plan (babbler/daemon/ipv4_service.py:130)",
            "read_routes_v4 (babbler/daemon/links/linux.py:281)",  # the clash check's dump
        ),
        ps.HOST: line(
            TRIO, "follow_kernel (babbler/daemon/reconcile.py:153)",
            "_pass (babbler/daemon/reconcile.py:222)",
            "apply (babbler/daemon/hostcare.py:90)",
        ),
        ps.RECONCILE: line(
            TRIO, "follow_kernel (babbler/daemon/reconcile.py:153)",
            "_pass (babbler/daemon/reconcile.py:190)",
            "_read_links (babbler/daemon/links/linux.py:170)",
            f"send (pyroute2/netlink/nlsocket.py:400);sleep ({SITE}:10)",
        ),
        ps.LINES: line(
            "_bootstrap (threading.py:995)", "_run (babbler/daemon/babeld/reader.py:205)"
        ),
        ps.CLIENTS: line(
            TRIO, "handle_client (babbler/daemon/server.py:130)",
            "_read_requests (babbler/daemon/server.py:90)",
            "_status (babbler/daemon/requests.py:80)",
            "status (babbler/daemon/view.py:150)",
        ),
        ps.IMPORTS: line(
            TRIO, "_follow (babbler/daemon/nodes/service.py:160)",
            "_find_and_load (<frozen importlib._bootstrap>:1176)",
            "<module> (babbler/core/graph.py:1)",
        ),
        ps.OTHER_BABBLER: line(ROOT, TRIO, "rerun_on (babbler/daemon/wakeup.py:45)"),
        ps.OTHER: line(ROOT, TRIO, f"wait ({SITE}:10)"),  # under main: trio's own
    }  # fmt: skip
    for source, sample in cases.items():
        frames, _ = ps.parse_line(sample) or ([], 0)
        assert ps.classify(frames) == source, (source, sample)
    assert set(cases) == set(ps.SOURCES)  # a source no sample can reach is a broken rule


def test_counts_add_up_per_source_and_other_lines_are_left_out() -> None:
    lines = [
        line(TRIO, "_push (babbler/daemon/nodes/service.py:200)", count=7),  # a push sent
        line(TRIO, "_ask (babbler/daemon/nodes/service.py:230)", count=5),
        line(TRIO, f"epoll ({SITE}:10)", count=3),
        "",
        "not a sample",
        "process 123 without a count x",
    ]
    counts = ps.by_source(lines)
    assert counts[ps.ASKS] == 12 and counts[ps.OTHER] == 3
    assert sum(counts.values()) == 15 and list(counts) == list(ps.SOURCES)
    top = ps.innermost(lines)
    assert top["daemon/nodes/service.py _push"] == 7
    assert top[f"{SITE} epoll"] == 3  # no babbler frame: the stack's last
