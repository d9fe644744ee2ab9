"""Shared test set-up. Integration tests need root, network namespaces and babeld: without
them they are skipped on a developer's machine, and fail (never skip) in CI. Every test has
a time bound: one that hangs fails with its name, and its clean-up still runs."""

from __future__ import annotations

import functools
import inspect
import os
import shutil
import signal
import subprocess
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio

# Tests press Ctrl-C on the programs they start (SIGINT: the example watcher, macos-check).
# A suite started in the background by a non-interactive shell (`cmd &`) has SIGINT ignored,
# and an ignored signal stays ignored in every child: they would never see it. Handled here,
# it is the default again in each child (exec resets a handled signal, not an ignored one).
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# A test bound: longer than any test takes here (the slowest, the bench's, ~90 s), far shorter
# than CI's budget. `@pytest.mark.timeout(SECONDS)` sets another for one test.
TEST_BOUND = 300.0


def integration_problem() -> str | None:
    if os.geteuid() != 0:
        return "integration tests need root"
    for tool in ("babeld", "ip", "ping"):
        if shutil.which(tool) is None:
            return f"integration tests need {tool} on PATH (scripts/setup installs it)"
    probe = "bbl-probe"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"cannot create network namespaces: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def _bounded(test: Callable[..., Awaitable[None]], seconds: float) -> Callable[..., Any]:
    """A trio test cancelled after `seconds` (TooSlowError), so its `async with` and
    `finally` clean-up runs as for any other failure."""

    @functools.wraps(test)
    async def bounded(*args: Any, **kwargs: Any) -> None:
        with trio.fail_after(seconds):
            await test(*args, **kwargs)

    return bounded


def bound_every_test(items: list[pytest.Item]) -> None:
    """trio tests through trio.fail_after; the others through pytest-timeout's signal,
    which raises inside the test (a SIGALRM raising inside trio's run loop would not clean
    up, so it is off for trio tests)."""
    for item in items:
        if not isinstance(item, pytest.Function):
            continue
        marker = item.get_closest_marker("timeout")
        seconds = float(marker.args[0]) if marker is not None and marker.args else TEST_BOUND
        if inspect.iscoroutinefunction(item.obj):
            item.obj = _bounded(item.obj, seconds)
            item.add_marker(pytest.mark.timeout(0), append=False)  # off: trio bounds it
        elif marker is None:
            item.add_marker(pytest.mark.timeout(seconds))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    bound_every_test(items)
    wanted = [item for item in items if item.get_closest_marker("integration")]
    if not wanted:
        return
    problem = integration_problem()
    if problem is None:
        return
    if os.environ.get("CI"):
        raise pytest.UsageError(f"CI is set but {problem}; integration tests must run in CI")
    for item in wanted:
        item.add_marker(pytest.mark.skip(reason=problem))
