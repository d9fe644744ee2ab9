"""The one bounded wait (babbler/lab/wait.py): the first value that holds, else the last."""

from __future__ import annotations

import time

from babbler.lab.wait import until


def test_the_first_value_that_holds_is_returned_without_waiting_out_the_bound() -> None:
    answers = iter([0, [], "ready", "later"])
    started = time.monotonic()
    assert until(lambda: next(answers), timeout=30, every=0.001) == "ready"
    assert time.monotonic() - started < 1


def test_a_check_that_never_holds_gives_its_last_value_after_the_bound() -> None:
    calls: list[float] = []

    def never() -> int:
        calls.append(time.monotonic())
        return 0

    started = time.monotonic()
    assert until(never, timeout=0.2, every=0.05) == 0
    assert calls[-1] - started >= 0.2  # the last ask is at the deadline, not before it
    assert 3 <= len(calls) <= 10


def test_a_check_is_asked_once_even_with_no_time_left() -> None:
    assert until(lambda: "yes", timeout=0) == "yes"
