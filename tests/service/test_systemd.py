"""The systemd unit: valid, sandboxed to an exposure of 2.0 or less, and in step with the CLI."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from babbler.daemon.cli_command import main
from babbler.daemon.keyfile import CREDENTIAL
from tests.needs import tool

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "systemd" / "babblerd.service"
MAX_EXPOSURE = 2.0


def settings(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, value = line.split("=", 1)
            out.setdefault(key.strip(), []).append(value.strip())
    return out


def exposure(unit: Path) -> float:
    analyze = tool("systemd-analyze", "systemd")
    result = subprocess.run(
        [analyze, "security", "--offline=true", str(unit)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    found = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", result.stdout)
    assert found, result.stdout + result.stderr
    return float(found.group(1))


def test_unit_scores_at_most_2_0() -> None:
    assert exposure(UNIT) <= MAX_EXPOSURE


def test_the_checker_does_fail_a_lax_unit(tmp_path: Path) -> None:
    lax = tmp_path / "lax.service"
    lax.write_text("[Service]\nType=notify\nExecStart=/usr/local/bin/babblerd\n")
    assert exposure(lax) > MAX_EXPOSURE


def test_unit_verifies_with_the_installed_program(tmp_path: Path) -> None:
    analyze = tool("systemd-analyze", "systemd")
    program = Path(sys.executable).with_name("babblerd")  # the one installed beside pytest
    assert program.exists(), program
    unit = tmp_path / "babblerd.service"
    unit.write_text(UNIT.read_text().replace("/usr/local/bin/babblerd", str(program)))
    result = subprocess.run(
        [analyze, "verify", str(unit)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr


def test_unit_keeps_the_contract() -> None:
    unit = settings(UNIT.read_text())
    assert unit["Type"] == ["notify"]
    assert unit["Restart"] == ["on-failure"]
    assert unit["RuntimeDirectory"] == ["babbler"] and unit["RuntimeDirectoryMode"] == ["0755"]
    assert unit["StateDirectory"] == ["babbler"] and unit["StateDirectoryMode"] == ["0700"]
    assert unit["WatchdogSec"]
    assert set(unit["AmbientCapabilities"][0].split()) == {"CAP_NET_ADMIN", "CAP_NET_RAW"}
    assert unit["CapabilityBoundingSet"] == unit["AmbientCapabilities"]


def test_unit_flags_are_flags_babblerd_accepts() -> None:
    unit = settings(UNIT.read_text())
    program, *flags = shlex.split(unit["ExecStart"][0])
    assert program == "/usr/local/bin/babblerd"
    help_text = CliRunner().invoke(main, ["--help"]).output
    for flag in flags:
        assert flag.startswith("--") and flag in help_text, flag
    # babblerd makes the kernel setup itself, inside the sandbox: nothing before it does,
    # and nothing in the sandbox takes /proc/sys/net or /proc/net away.
    assert "--skip-kernel-setup" not in flags and "ExecStartPre" not in unit
    assert "ProtectKernelTunables" not in unit and "ProcSubset" not in unit
    assert "pidfd_getfd" in unit["SystemCallFilter"]  # the control buffer widening


def test_the_key_credential_line_is_the_one_babblerd_reads() -> None:
    """The documented drop-in line names the credential babblerd looks for."""
    line = next(x for x in UNIT.read_text().splitlines() if "LoadCredential=" in x)
    name, _, source = line.lstrip("#").split("=", 1)[1].partition(":")
    assert name == CREDENTIAL and source == "/etc/babbler/mesh.key"
    assert line.lstrip("#") in (ROOT / "docs" / "operations.md").read_text()


def test_sysusers_file_creates_the_units_user() -> None:
    unit = settings(UNIT.read_text())
    entry = (ROOT / "systemd" / "babbler.sysusers").read_text().split("\n")
    users = [line.split()[1] for line in entry if line.startswith("u ")]
    assert users == unit["User"]


def test_operations_guide_installs_this_unit() -> None:
    guide = (ROOT / "docs" / "operations.md").read_text()
    for step in (
        "systemd/babblerd.service /etc/systemd/system/babblerd.service",
        "systemd/babbler.sysusers /usr/lib/sysusers.d/babbler.conf",
        "systemctl enable --now babblerd",
        "journalctl -u babblerd",
        "systemctl disable --now babblerd",
    ):
        assert step in guide, step


@pytest.mark.integration
@pytest.mark.timeout(1500)  # the first run makes the Debian tree: a few minutes more
def test_the_unit_under_a_real_systemd() -> None:
    """scripts/systemd-check: two containers booted by systemd-nspawn, each installed by
    pip and one `babblerd install-system-daemon --key-file ...`; readiness, keyed mesh, node
    info, bench, doctor, install again (no change), an upgraded unit, a hand-edited config,
    stop restoring every setting, restart, kill -9, uninstall (the host as before), --purge.
    Minutes: the Debian tree is made once and kept."""
    if os.geteuid() != 0:
        pytest.skip("boots containers: needs root")
    for name, package in (("debootstrap", "debootstrap"), ("systemd-nspawn", "systemd-container")):
        tool(name, package)
    done = subprocess.run(
        [str(ROOT / "scripts" / "systemd-check")],
        capture_output=True,
        text=True,
        timeout=1500,
        check=False,
    )
    print(done.stdout[-4000:], done.stderr[-4000:])
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "all checks passed" in done.stdout
