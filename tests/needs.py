"""Test prerequisites that are programs: skipped on a developer's machine without them, a
failure in CI (where scripts/setup --test installs them)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

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


def root(why: str) -> None:
    """Skip unless root (fail when CI is set: CI runs as root)."""
    if os.geteuid() == 0:
        return
    message = f"not root: {why}"
    if os.environ.get("CI"):
        pytest.fail(f"CI is set but {message}")
    pytest.skip(message)


SYSTEM_PYTHON = "/usr/bin/python3"  # Debian's, where python3-torch installs torch


def torch() -> tuple[str, str | None]:
    """(a Python with torch and gloo, its torchrun or None), as scripts/setup --test installs
    one: a CPU build in the venv with torchrun, else Debian's python3-torch, whose torchrun
    (1.13) fails on Python 3.11 before it starts anything. Skip (fail in CI) without."""
    check = ["-c", "import torch.distributed as d; assert d.is_gloo_available()"]
    for python in (sys.executable, SYSTEM_PYTHON):
        if not os.path.exists(python):
            continue
        if subprocess.run([python, *check], capture_output=True, check=False).returncode == 0:
            torchrun = Path(sys.executable).with_name("torchrun")
            return python, str(torchrun) if python == sys.executable else None
    message = "torch with gloo not found (scripts/setup --test installs it)"
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


def netifaces() -> None:
    """Skip (fail when CI is set) unless netifaces is importable: babblerd's macOS backend,
    which the macOS lab runs on Linux, reads addresses with it."""
    if importlib.util.find_spec("netifaces") is not None:
        return
    message = "netifaces not installed (scripts/setup --test installs netifaces-plus)"
    if os.environ.get("CI"):
        pytest.fail(f"CI is set but {message}")
    pytest.skip(message)
