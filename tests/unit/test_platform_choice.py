"""The platform is one value (docs/design.md "Platform and host"): only core/platform.py reads
the running system for it and only host/system.py for facts about the host; the modules that
import the host facts are exactly the table's host rows; and the choice is a setting."""

from __future__ import annotations

import ast
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from babbler.core.config import merge
from babbler.core.errors import ConfigError
from babbler.core.platform import LINUX, MACOS, RUNNING, of_system
from babbler.daemon.spawn import process_name
from babbler.host.system import LINUX_HOST
from babbler.lab.wait import until
from tests.unit.test_module_map import DESIGN, MODULES, imports

CHOICES = {"core.platform", "host.system"}


def reads_the_system(path: Path) -> list[str]:
    """Where a file reads the running system: `sys.platform`, the standard `platform`
    module, or a name of the old constants."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        where = f"{path.name}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Attribute) and node.attr == "platform":
            if isinstance(node.value, ast.Name) and node.value.id == "sys":
                found.append(f"{where} sys.platform")
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if "platform" in names or (
                isinstance(node, ast.ImportFrom) and node.module == "platform"
            ):
                found.append(f"{where} the platform module")
        elif isinstance(node, ast.Name | ast.alias):
            name = node.id if isinstance(node, ast.Name) else (node.asname or node.name)
            if name in ("IS_LINUX", "IS_DARWIN"):
                found.append(f"{where} {name}")
    return found


def test_only_the_two_choices_read_the_running_system() -> None:
    outside = [
        where
        for module, path in MODULES.items()
        if module not in CHOICES
        for where in reads_the_system(path)
    ]
    assert not outside, f"read the platform from core/platform.py (a Platform): {outside}"


def test_the_guard_sees_each_way_of_reading_the_system(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text(
        "import platform\nimport sys\n\nLINUX = sys.platform == 'linux'\nfrom x import IS_DARWIN\n"
    )
    seen = sorted(where.split(" ", 1)[1] for where in reads_the_system(planted))
    assert seen == ["IS_DARWIN", "sys.platform", "the platform module"]


def host_rows() -> set[str]:
    """The modules of the design's table rows marked `host`."""
    text = DESIGN.read_text()
    section = text[text.index("## Platform and host") :]
    section = section[: section.index("\n## ", 1)]
    out = set()
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) == 4 and cells[2] == "host":
            path = re.match(r"`([\w/.]+)`", cells[0])
            assert path, f"a host row without a module path: {line}"
            out.add(path.group(1).removesuffix(".py").replace("/", "."))
    return out


def test_the_modules_reading_host_facts_are_the_tables_host_rows() -> None:
    readers = {
        module
        for module in MODULES
        if module != "host.system" and any(t == "host.system" for t, _ in imports(module))
    }
    assert readers == host_rows(), (
        "docs/design.md's host rows (Platform and host) and the modules that import"
        " host/system.py differ"
    )


def test_the_platform_is_a_setting_that_defaults_to_the_running_system() -> None:
    assert merge({}, {}).platform is (RUNNING or LINUX)
    assert merge({"platform": "macos"}, {}).platform is MACOS
    assert merge({}, {"platform": "Linux"}).platform is LINUX
    with pytest.raises(ConfigError, match="platform: expected one of linux, macos"):
        merge({}, {"platform": "windows"})


def test_a_system_babbler_does_not_run_on_has_no_platform() -> None:
    assert of_system("linux") is LINUX and of_system("darwin") is MACOS
    assert of_system("win32") is None


@pytest.mark.skipif(not LINUX_HOST, reason="PR_SET_PDEATHSIG is Linux's")
def test_a_child_outlives_babblerd_only_when_the_platform_says_so() -> None:
    """Linux ties babeld to babblerd; macOS cannot, and the lab's macOS nodes act so: their
    babeld outlives a `kill -9` of babblerd, as on a Mac, for the next start to find. One
    parent, one child of each kind: once the tied one is gone, the other must still live."""
    parent = (
        "import os\n"
        "from babbler.daemon.spawn import spawn\n"
        "tied, free = spawn(['sleep', '30']), spawn(['sleep', '30'], tied=False)\n"
        "print(tied.pid, free.pid, flush=True)\n"
        "os._exit(0)\n"
    )
    run = subprocess.run([sys.executable, "-c", parent], capture_output=True, text=True)
    tied, free = (int(pid) for pid in run.stdout.split())
    try:
        assert until(lambda: process_name(tied) is None, 10.0), "the tied child lives on"
        assert process_name(free) == "sleep"
    finally:
        for pid in (tied, free):
            if process_name(pid) is not None:
                os.kill(pid, signal.SIGKILL)
