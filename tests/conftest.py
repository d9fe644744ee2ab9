"""Shared test set-up. Integration tests need root, network namespaces and babeld: without
them they are skipped on a developer's machine, and fail (never skip) in CI."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest


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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
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
