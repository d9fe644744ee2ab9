"""The lab says when it is too big for the machine, from the measured cost per node."""

from __future__ import annotations

import pytest

from babbler.lab.capacity import cores_needed, too_big


def test_the_measured_sizes_fall_on_the_right_sides() -> None:
    assert cores_needed(32, 0.1) == pytest.approx(32 * 0.014)
    assert too_big(32, 0.1, cores=2) is None  # converged in 11 s here
    assert too_big(64, 0.4, cores=2) is None  # converged in 33 s here
    said = too_big(64, 0.1, cores=2)  # never settled here
    assert said is not None
    assert "64 nodes at hello 0.1 s need about 1.8 cores" in said
    assert "this machine has 2" in said and "--hello-interval 0.4 needs 0.45" in said
    assert too_big(64, 0.1, cores=8) is None


def test_the_hint_is_a_hello_interval_that_fits_if_any_does() -> None:
    said = too_big(64, 0.1, cores=1)
    assert said is not None and "--hello-interval 0.8" in said
    said = too_big(512, 0.1, cores=1)
    assert said is not None and "--hello-interval" not in said
