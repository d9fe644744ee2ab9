"""Each benchmark runs (short) and writes its JSON; the plot is drawn from those files.
How fast is not checked here: docs/benchmarks.md holds the measured figures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests import needs
from tests.needs import tool

pytestmark = pytest.mark.integration
BENCH = Path(__file__).resolve().parents[2] / "bench"


def run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, str(BENCH / script), *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("results")
    names = ("convergence", "latency", "reaction", "cost", "scale", "startup", "linkbench")
    for name in (*names, "monitor-cost"):
        script = f"{name.replace('-', '_')}.py"
        printed = run(script, "--quick", "--out", str(out / f"{name}.json")).stdout
        assert "wrote" in printed and "---" in printed  # a table, then the file
    return out


def load(results: Path, name: str) -> dict[str, object]:
    data: dict[str, object] = json.loads((results / f"{name}.json").read_text())
    assert data["benchmark"] == name and "babeld" in data["machine"]  # type: ignore[operator]
    return data


def test_convergence_writes_times_per_scenario_and_mode(results: Path) -> None:
    data = load(results, "convergence")
    assert data["results"]["up-line4"]["babbler"]["n"] == 1  # type: ignore[index]


def test_latency_writes_each_reader(results: Path) -> None:
    phases = load(results, "latency")["phases"]
    for name in ("direct", "polling-5s", "monitor x1", "monitor x10", "watch x10"):
        assert phases[name]["latency_ms"]["n"] > 0, name  # type: ignore[index]


def test_reaction_writes_its_cycles(results: Path) -> None:
    data = load(results, "reaction")
    assert data["complete"] == data["cycles"] == 10


def test_cost_writes_each_measure(results: Path) -> None:
    data = load(results, "cost")
    for key in ("exec_to_served_s", "idle_on_demand", "rss_idle_mb", "rss_1000_clients_mb"):
        assert key in data, key


def test_monitor_cost_writes_babeld_with_and_without_readers(results: Path) -> None:
    rows: list[dict[str, Any]] = load(results, "monitor-cost")["results"]  # type: ignore[assignment]
    (row,) = rows
    assert row["nodes"] == 4 and row["babeld_cpu_percent_unmonitored"] >= 0
    assert row["monitor_lines_per_s_per_node"] > 0  # the readers got babeld's stream


def test_scale_writes_babblerd_next_to_babeld(results: Path) -> None:
    rows = load(results, "scale")["results"]
    by_mode = {row["mode"]: row for row in rows}  # type: ignore[attr-defined]
    assert set(by_mode) == {"babeld-same-hello", "babbler"}
    babbler = by_mode["babbler"]
    assert babbler["nodes"] == 4 and babbler["idle"]["babblerd_cpu_percent"] >= 0
    # babeld chatters (mostly repeats, dropped at the door); clients get the real changes.
    assert babbler["idle"]["lines_in_per_s"] > babbler["idle"]["repeats_per_s"] > 0
    assert babbler["watched"]["items_out_per_s"] >= 0
    assert by_mode["babeld-same-hello"]["reachable_s"] > 0


def test_startup_starts_babeld_early_on_a_clean_node(results: Path) -> None:
    rows: list[dict[str, Any]] = load(results, "startup")["results"]  # type: ignore[assignment]
    (result,) = rows
    # Every run is a clean stop and start on settled links: babeld is spawned early.
    assert result["started_early"] == result["runs"] == 3
    assert 0 < result["exec_to_babeld_s"]["p50"] < 10


def test_linkbench_puts_babblerctl_bench_next_to_iperf3(results: Path) -> None:
    tool("iperf3", "iperf3")
    data = load(results, "linkbench")
    paths = {row["path"] for row in data["unshaped"]}  # type: ignore[attr-defined]
    assert paths == {"n1 -> n2", "n2 -> n1", "n1 -> n3", "n3 -> n1"}
    for row in data["unshaped"]:  # type: ignore[attr-defined]
        assert row["babbler_gbit_s"] > 0 and row["iperf3_gbit_s"] > 0
    shaped = [row for row in data["shaped"] if "path" in row]  # type: ignore[attr-defined]
    assert [row["shaped_to"] for row in shaped] == ["100mbit", "1gbit"]
    assert [row["bytes"] for row in data["sweep"]["sweep"]][-1] == 16 << 20  # type: ignore[index]


def test_mlx_bandwidth_puts_a_real_mlx_job_next_to_iperf3(tmp_path: Path) -> None:
    tool("iperf3", "iperf3")
    needs.mlx()
    out, svg = tmp_path / "mlx-bandwidth.json", tmp_path / "mlx.svg"
    printed = run("mlx_bandwidth.py", "--quick", "--out", str(out), "--svg", str(svg)).stdout
    assert "wrote" in printed and "---" in printed
    data = json.loads(out.read_text())
    sweep, parallel = data["sweep"], data["parallel"]
    assert set(sweep["mlx"]) == {"oneway", "roundtrip", "allgather"}
    assert list(sweep["mlx"]["allgather"])[-1] == str(16 << 20)
    assert sweep["iperf3_gbit_s"] > 0 and sweep["babblerctl"]["send"]["gbit_s"] > 0
    assert all(len(h["ips"]) == 2 for h in parallel["hostfile"])  # both cables
    assert parallel["two_cables"]["gbit_s"] > 0 and parallel["one_cable"]["gbit_s"] > 0
    assert svg.read_text().startswith("<svg")


def test_plot_draws_an_svg_from_the_results(results: Path, tmp_path: Path) -> None:
    out = tmp_path / "plot.svg"
    run("plot.py", "--results", str(results), "--out", str(out))
    svg = out.read_text()
    assert svg.startswith("<svg") and "Event latency" in svg and "Convergence" in svg
    assert "CPU per node" in svg
