"""Test prerequisites that are programs: skipped on a developer's machine without them, a
failure in CI (where scripts/setup --test installs them)."""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess

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


SYSTEM_PYTHON = "/usr/bin/python3"  # Debian's, where python3-torch installs torch


def torch() -> str:
    """The Python that has torch with gloo (Debian's python3-torch), or skip (fail in CI)."""
    found = (
        subprocess.run(
            [SYSTEM_PYTHON, "-c", "import torch.distributed as d; assert d.is_gloo_available()"],
            capture_output=True,
            check=False,
        )
        if os.path.exists(SYSTEM_PYTHON)
        else None
    )
    if found is not None and found.returncode == 0:
        return SYSTEM_PYTHON
    message = "torch with gloo not found (Debian package python3-torch; scripts/setup --test)"
    if os.environ.get("CI"):
        pytest.fail(f"CI is set but {message}")
    pytest.skip(message)


MLX_VERSION = "0.32.4"  # pinned in pyproject.toml's test extra: its Hostfile class is private


def mlx() -> None:
    """Skip (fail when CI is set) unless MLX is importable at the pinned version."""
    try:
        found = importlib.metadata.version("mlx")
    except importlib.metadata.PackageNotFoundError:
        message = f"mlx {MLX_VERSION} not installed (scripts/setup --test installs mlx[cpu])"
    else:
        if found == MLX_VERSION:
            return
        message = f"mlx {found} installed, the tests pin {MLX_VERSION}"
    if os.environ.get("CI"):
        pytest.fail(f"CI is set but {message}")
    pytest.skip(message)
