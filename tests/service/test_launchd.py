"""The launchd plist: well-formed, and its command line is one babblerd accepts."""

from __future__ import annotations

import plistlib
import re
from pathlib import Path
from typing import Any

from babbler.daemon import argv
from babbler.daemon.cli import load_config as build
from babbler.daemon.cli_command import parse

ROOT = Path(__file__).resolve().parents[2]
PLIST = ROOT / "launchd" / "org.babbler.babblerd.plist"


def load() -> dict[str, Any]:
    with PLIST.open("rb") as file:
        data: dict[str, Any] = plistlib.load(file)
    return data


def test_label_is_reverse_dns_and_names_the_file() -> None:
    label = load()["Label"]
    assert re.fullmatch(r"[a-z]+(\.[a-z0-9-]+){2,}", label)
    assert PLIST.name == f"{label}.plist"


def test_it_is_kept_alive_started_at_load_and_logs_to_var_log() -> None:
    plist = load()
    assert plist["RunAtLoad"] is True and plist["KeepAlive"] is True
    assert plist["StandardOutPath"] == plist["StandardErrorPath"] == "/var/log/babblerd.log"


def test_program_arguments_are_a_command_line_babblerd_accepts() -> None:
    program, *args = load()["ProgramArguments"]
    assert Path(program).name == "babblerd" and Path(program).is_absolute()
    # As babblerd reads it (cli.run): the lean reader, else click, which exits on a bad flag.
    config, flags = argv.parse(args) or parse(args)
    build(flags, config)  # raises ConfigError on a bad value or a config file that is not there


def test_path_lets_launchd_find_babeld_from_homebrew() -> None:
    path = load()["EnvironmentVariables"]["PATH"].split(":")
    assert {"/opt/homebrew/sbin", "/usr/local/sbin", "/usr/sbin"} <= set(path)


def test_operations_guide_installs_this_file() -> None:
    guide = (ROOT / "docs" / "operations.md").read_text()
    assert f"launchd/{PLIST.name}" in guide
    assert f"/Library/LaunchDaemons/{PLIST.name}" in guide
