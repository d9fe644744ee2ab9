"""Which cable is my job on (issue 34's "done when"): a real MLX job between two nodes of a
4-ring, over the hostfile babblerctl wrote, seen from a third node that takes no part in it.
While the job runs `babblerctl top --once` lists the hostfile's cable first and the page of
`babblerctl web` (in Debian's chromium) draws it carrying the job, every other cable under
1 % of its rate; after it, the `counters` every view reads say that cable carried the job's
bytes and every other cable under 1 % of them."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from babbler.client import sync
from babbler.lab import Lab, Node, wait
from babbler.lab.jobs import babblerctl
from tests import needs
from tests.integration.helpers import WAIT, LabFactory, until
from tests.integration.test_jobs import run_job
from tests.integration.test_top import bits, cable_rows, ring, top_once
from tests.integration.test_web import browser, page, web  # noqa: F401

if TYPE_CHECKING:
    from selenium.webdriver.remote.webdriver import WebDriver

pytestmark = pytest.mark.integration

ROUNDS, ROUND_MIB = 120, 4  # all_sums of 4 MiB, 50 ms apart: ~1 GB over the cable in ~10 s


def job_hostfile(node: Node, names: str) -> list[dict[str, Any]]:
    """`babblerctl hostfile --format mlx --nodes NAMES`, asked until both hosts have a cable."""

    def written() -> list[dict[str, Any]] | None:
        done = babblerctl(node, "hostfile", "--format", "mlx", "--nodes", names)
        file: list[dict[str, Any]] = json.loads(done.stdout) if done.returncode == 0 else []
        return file if len(file) == 2 and all(h["ips"] for h in file) else None

    file = wait.until(written, WAIT, every=0.5)
    assert file, f"no hostfile for {names} within {WAIT} s"
    return file


def carried(lab: Lab, viewer: Node) -> dict[tuple[str, str], int]:
    """Bytes each (node name, link) sent, from the `counters` the views read on `viewer`
    (every node's, once `viewer` has asked for long enough)."""
    names = {lab.status(n)["node_id"]: n.name for n in lab.nodes}
    answer = sync.ask(viewer.socket, "counters")
    return {
        (names[node["node_id"]], link["name"]): link["tx_bytes"]
        for node in answer["nodes"]
        for link in node["interfaces"]
    }


def every_node_counted(lab: Lab, viewer: Node) -> dict[tuple[str, str], int]:
    """Counters from all four nodes (the viewer asks the others once it is asked)."""

    def all_four() -> dict[tuple[str, str], int] | None:
        counted = carried(lab, viewer)
        return counted if len({name for name, _ in counted}) == 4 else None

    counted = wait.until(all_four, WAIT, every=0.5)
    assert counted, f"not every node's counters within {WAIT} s"
    return counted


def on_the_page(shown: dict[str, Any], ids: dict[str, str]) -> dict[frozenset[str], float]:
    """Bytes a second each cable carries on the page, both ways, by its ends' node names."""
    names = {node_id: name for name, node_id in ids.items()}
    return {
        frozenset((names[c["a"]], names[c["b"]])): (c["a_to_b"] or 0) + (c["b_to_a"] or 0)
        for c in shown["cables"]
        if c["a"] in names and c["b"] in names
    }


def test_the_views_show_an_mlx_jobs_bytes_on_the_cables_its_hostfile_named(
    make_lab: LabFactory,
    tmp_path: Path,
    browser: WebDriver,  # noqa: F811
) -> None:
    needs.mlx()
    lab = ring(make_lab, 4)
    n1, n2, n3, _ = lab.nodes
    file = job_hostfile(n1, "n1,n2")
    job_cable = {(n1.name, lab.end_name(1, 2)), (n2.name, lab.end_name(2, 1))}
    ends = {a["address"] for n in (n1, n2) for a in lab.status(n)["addresses_v4"]}
    on_cable = {a["address"] for n, link in ((n1, "v1x2"), (n2, "v2x1"))
                for a in lab.status(n)["addresses_v4"] if a["interface"] == link}  # fmt: skip
    assert {h["ips"][0] for h in file} == on_cable and on_cable <= ends, file

    ids = {n.name: str(lab.status(n)["node_id"]) for n in lab.nodes}
    before = every_node_counted(lab, n3)
    results: list[Any] = []
    rates: list[dict[frozenset[str], float]] = []
    job = threading.Thread(
        target=lambda: results.append(
            run_job(lab, tmp_path / "job", file, "0", str(ROUNDS), str(ROUND_MIB))
        )
    )
    with web(n3, tmp_path / "web.log") as url:
        browser.get(url)
        job.start()
        try:
            until(lambda: (tmp_path / "job" / "out" / "steady").exists(), 120, "the job's rounds")
            lines = top_once(lab, n3)

            def drawn_busy() -> bool:
                rates.append(on_the_page(page(browser), ids))
                return rates[-1].get(frozenset(("n1", "n2")), 0) > 1e6  # bytes/s

            until(drawn_busy, 30, "the page drawing the job's cable busy")
        finally:
            job.join()
    assert results and all(r["steady_ok"] for r in results[0]), results

    first, rest = cable_rows(lines)[0], cable_rows(lines)[1:]
    assert {(first[0], first[1]), (first[2], first[3])} == job_cable, lines
    busy = bits(*first[-4:-2]) + bits(*first[-2:])
    assert busy > 10e6, lines  # megabits a second while the job ran
    for other in rest:
        assert bits(*other[-4:-2]) + bits(*other[-2:]) < busy / 100, lines

    busiest = rates[-1]
    assert len(busiest) == 4, busiest  # every cable drawn, the job's among them
    for cable, rate in busiest.items():
        if cable != frozenset(("n1", "n2")):
            assert rate < busiest[frozenset(("n1", "n2"))] / 100, busiest

    after = every_node_counted(lab, n3)
    sent = {end: after[end] - before.get(end, 0) for end in after}
    job_bytes = sum(sent[end] for end in job_cable)
    assert job_bytes > ROUNDS * ROUND_MIB * 2**20, sent  # each rank sends its block each round
    for end, count in sent.items():
        if end not in job_cable:
            assert count < job_bytes / 100, (end, count, job_bytes)
    print("\n" + "\n".join(lines), f"\njob cable sent {job_bytes} bytes;", sorted(sent.items()))
    print("the page, bytes/s:", {"-".join(sorted(c)): round(r) for c, r in busiest.items()})
