"""A built wheel holds the whole package and gives the three commands, each with --version
and shell completion."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from babbler import __version__
from tests.guard import no_real_links

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = ("babblerd", "babblerctl", "babbler-lab")


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from this tree, installed into a fresh virtualenv."""
    out = tmp_path_factory.mktemp("wheel")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "-w", str(out), str(ROOT)],
        check=True,
        timeout=300,
    )
    (wheel,) = out.glob("babbler-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    sources = {str(p.relative_to(ROOT)) for p in (ROOT / "babbler").rglob("*.py")}
    assert sources <= set(names), sources - set(names)
    assert not any(name.startswith("tests/") for name in names)
    # A fresh virtualenv, as a user would install it (dependencies from the package index).
    venv = out / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    subprocess.run(
        [str(venv / "bin" / "python"), *pip[1:], "install", str(wheel)], check=True, timeout=600
    )
    return venv


def run(installed: Path, command: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    program = [str(installed / "bin" / command)]
    if command == "babblerd":  # should it start after all, it touches nothing outside the test:
        guard = installed.parent / "guard"  # its files here, its network a fresh namespace
        args = (*args, "--run-dir", f"{guard}/run", "--state-dir", f"{guard}/state")
        args = (*args, "--mode", "on-demand", "--interface", "babbler-test-none")
        program = no_real_links(program)
    return subprocess.run(
        [*program, *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env={**os.environ, **env},
    )


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_from_the_wheel_tells_its_version(installed: Path, command: str) -> None:
    result = run(installed, command, "--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"{command}, version {__version__}"


def test_the_wheel_runs_its_own_code(installed: Path) -> None:
    probe = subprocess.run(
        [str(installed / "bin" / "python"), "-c", "import babbler; print(babbler.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        cwd=installed,  # not this tree, which `-c` would put first on sys.path
    )
    assert probe.stdout.startswith(str(installed))


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_scripts_are_generated_as_documented(installed: Path, shell: str) -> None:
    for command in ("babblerctl", "babblerd"):
        variable = f"_{command.upper().replace('-', '_')}_COMPLETE"
        result = run(installed, command, **{variable: f"{shell}_source"})
        assert result.returncode == 0 and command in result.stdout, result.stderr
    guide = (ROOT / "docs" / "operations.md").read_text()
    assert f"_BABBLERCTL_COMPLETE={shell}_source babblerctl" in guide
