"""The lab says when it is too big for the machine, from the measured cost per node."""

from __future__ import annotations

import pytest

from babbler.lab.capacity import cores_needed, too_big


def test_the_measured_sizes_fall_on_the_right_sides() -> None:
    assert cores_needed(64, 0.1) == pytest.approx(64 * 0.0077)
    assert too_big(32, 0.1, cores=2) is None  # converged in 12 s here
    assert too_big(64, 0.1, cores=2) is None  # converged in 41 s here
    assert too_big(64, 0.4, cores=2) is None
    said = too_big(128, 0.1, cores=2)  # never measured: twice what settled
    assert said is not None
    assert "128 nodes at hello 0.1 s need about 1.0 cores" in said
    assert "this machine has 2" in said and "--hello-interval 0.2 needs 0.49" in said
    assert too_big(128, 0.1, cores=8) is None


def test_the_hint_is_a_hello_interval_that_fits_if_any_does() -> None:
    said = too_big(64, 0.1, cores=1)
    assert said is not None and "--hello-interval 0.2" in said
    said = too_big(2048, 0.1, cores=1)
    assert said is not None and "--hello-interval" not in said
