"""A mesh link up with nobody answering is said once, after QUIET, and again when a
neighbour comes."""

from __future__ import annotations

from babbler.core.lonely import LonelyLinks


def test_a_lonely_link_is_said_once_and_its_neighbour_when_it_comes() -> None:
    lonely = LonelyLinks(quiet=30.0)
    assert lonely.check(0.0, {"v1", "v2"}, {"v2"}) == ([], [])
    assert lonely.check(29.0, {"v1", "v2"}, {"v2"}) == ([], [])
    assert lonely.check(30.0, {"v1", "v2"}, {"v2"}) == (["v1"], [])
    assert lonely.check(90.0, {"v1", "v2"}, {"v2"}) == ([], [])  # once
    assert lonely.check(91.0, {"v1", "v2"}, {"v1", "v2"}) == ([], ["v1"])
    assert lonely.check(92.0, {"v2"}, {"v2"}) == ([], [])  # v1 went: forgotten
    assert lonely.check(93.0, {"v1", "v2"}, {"v2"}) == ([], [])  # its clock starts again
    assert lonely.check(123.0, {"v1", "v2"}, {"v2"}) == (["v1"], [])
