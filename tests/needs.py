"""Test prerequisites that are programs: skipped on a developer's machine without them, a
failure in CI (where scripts/setup --test installs them)."""

from __future__ import annotations

import os
import shutil

import pytest


def tool(name: str, package: str) -> str:
    """The path of `name`, or skip (fail when CI is set) naming the Debian package."""
    path = shutil.which(name)
    if path is not None:
        return path
    message = f"{name} not found (Debian package {package}; scripts/setup --test installs it)"
    if os.environ.get("CI"):
        pytest.fail(f"CI is set but {message}")
    pytest.skip(message)
