"""Link costs from speed: the formula's promises, overrides, and sysfs speed files."""

from __future__ import annotations

from pathlib import Path

import pytest

from babbler.core.cost import UNKNOWN_COST, link_cost, speed_cost
from babbler.core.links import Link
from babbler.host.sysfs import read_speed


def test_fast_paths_of_up_to_three_hops_beat_one_slow_hop() -> None:
    fast, slow = speed_cost(10_000), speed_cost(1_000)
    assert (fast, slow) == (32, 128)
    assert 3 * fast < slow  # a 3-hop 10 Gb/s path wins over one 1 Gb/s hop
    assert 4 * fast >= slow  # a fourth hop no longer does (every hop adds latency)
    assert speed_cost(40_000) < fast < speed_cost(2_500) < slow < speed_cost(100)


def test_costs_fall_as_speeds_rise_and_stay_finite() -> None:
    speeds = [1, 10, 100, 1_000, 2_500, 5_000, 10_000, 25_000, 40_000, 100_000, 400_000]
    costs = [speed_cost(s) for s in speeds]
    assert costs == sorted(costs, reverse=True)
    assert all(1 <= c < 65535 for c in costs)


def test_unknown_speed_costs_babelds_default_but_thunderbolt_counts_as_fast() -> None:
    assert link_cost(Link("eth1", 2, has_device=True)) == UNKNOWN_COST == 96
    assert link_cost(Link("thunderbolt0", 3, driver="thunderbolt-net")) == 32
    assert link_cost(Link("eth2", 4, speed_mbps=1000)) == 128


def test_overrides_by_glob_win_in_order() -> None:
    link = Link("en5", 5, speed_mbps=10_000)
    assert link_cost(link, [("tb*", 16), ("en*", 200), ("en5", 1)]) == 200
    assert link_cost(link, [("tb*", 16)]) == 32


@pytest.mark.parametrize(
    ("content", "speed"),
    [("10000\n", 10000), ("1000\n", 1000), ("-1\n", None), ("", None), ("garbage", None)],
)
def test_sysfs_speed_files(tmp_path: Path, content: str, speed: int | None) -> None:
    path = tmp_path / "speed"
    path.write_text(content)
    assert read_speed(path) == speed


def test_an_unreadable_speed_file_is_unknown(tmp_path: Path) -> None:
    # Reading `speed` of a link that is down fails with EINVAL; a directory stands in.
    assert read_speed(tmp_path) is None
    assert read_speed(tmp_path / "absent") is None
