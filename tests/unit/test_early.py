"""When babblerd does not start babeld before its heavy imports, and says why."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from babbler.core.config import Config
from babbler.core.platform import MACOS
from babbler.daemon.early import why_not
from babbler.host.system import LINUX_HOST

pytestmark = pytest.mark.skipif(not LINUX_HOST, reason="the early start is Linux only")


def config(tmp_path: Path) -> Config:
    base = Config(run_dir=tmp_path / "run", state_dir=tmp_path / "state", babeld="sh")
    return replace(base, mode="always")


def test_a_clean_always_node_starts_early(tmp_path: Path) -> None:
    assert why_not(config(tmp_path)) is None


def test_leftovers_of_a_dead_babeld_are_left_to_the_normal_start(tmp_path: Path) -> None:
    settings = config(tmp_path)
    settings.private_dir.mkdir(parents=True)
    (settings.private_dir / "babeld.pid").write_text("12345\n")
    assert "left files" in (why_not(settings) or "")


def test_on_demand_and_a_missing_babeld_do_not_start_early(tmp_path: Path) -> None:
    assert why_not(replace(config(tmp_path), mode="on-demand")) == "mode on-demand"
    missing = replace(config(tmp_path), babeld="/nonexistent/babeld")
    assert "not found" in (why_not(missing) or "")


def test_the_macos_platform_never_starts_early(tmp_path: Path) -> None:
    """macOS has no sysfs and no death signal: in the lab too, its babeld starts later."""
    assert why_not(replace(config(tmp_path), platform=MACOS)) == "not on macOS"


def test_the_early_start_imports_no_file_writer_machinery() -> None:
    """The early start is about babeld's exec coming first: tempfile (and the shutil and
    random it brings, ~4.7 ms) is imported only when a file is written (host/whole.py)."""
    code = (
        "import sys, babbler.daemon.early; print(sorted({'tempfile', 'shutil'} & set(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout
