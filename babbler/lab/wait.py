"""The one bounded wait of the lab, the benchmarks and the tests: poll a check until it
holds or a deadline passes. The caller says what failing means (LabError, a test's
assertion), so each wait states its bound and its reason in one place."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

POLL = 0.05  # fine enough for a test's timing, coarse enough to cost nothing on 2 cores


def until(check: Callable[[], T], timeout: float, every: float = POLL) -> T:
    """The first truthy value of `check()`, asked every `every` seconds; its last (falsy)
    value once `timeout` seconds have passed. It is asked at least once, and once more
    at the deadline, so a wait never fails on a check it did not make. Raises what the
    check raises."""
    deadline = time.monotonic() + timeout
    while True:
        last_call = time.monotonic() >= deadline
        value = check()
        if value or last_call:
            return value
        time.sleep(max(0.0, min(every, deadline - time.monotonic())))
