"""babblerd's lean command-line reader (argv.py) against click's, the one users see in
errors and help: whatever the lean reader accepts, click reads the same way."""

from __future__ import annotations

import plistlib
import re
import shlex
from pathlib import Path
from typing import Any

import click
from hypothesis import given
from hypothesis import strategies as st

from babbler.core.config import SETTINGS
from babbler.daemon import argv
from babbler.daemon.cli_command import flags_given, main
from babbler.lab import Lab, Node

ROOT = Path(__file__).resolve().parents[2]
NIX = ROOT / "nix" / "module.nix"

FLAGS = [f"--{s.key}" for s in SETTINGS] + ["--config"]
WORDS = st.sampled_from(
    ["always", "ON-DEMAND", "Debug", "off", "json", "v*", "0.5", "", "-1", "--mode", "x=1"]
)
ODD = st.sampled_from(["--help", "-h", "--version", "--", "--nope", "stray", "-x", "--mod"])


def by_click(tokens: list[str]) -> tuple[Path | None, dict[str, Any]] | None:
    """What click's command gives the daemon for `tokens`, or None when click answers itself
    (an error, help, version)."""
    try:
        context = main.make_context("babblerd", list(tokens))
    except (click.ClickException, click.exceptions.Exit):
        return None
    params = dict(context.params)
    config = params.pop("config")
    return config, flags_given(params)


@st.composite
def command_lines(draw: st.DrawFn) -> list[str]:
    tokens: list[str] = []
    for _ in range(draw(st.integers(0, 6))):
        flag = draw(st.sampled_from(FLAGS))
        kind = draw(st.sampled_from(["separate", "inline", "bare", "odd"]))
        if kind == "separate":
            tokens += [flag, draw(WORDS)]
        elif kind == "inline":
            tokens.append(f"{flag}={draw(WORDS)}")
        elif kind == "bare":
            tokens.append(flag)
        else:
            tokens.append(draw(ODD))
    return tokens


@given(command_lines())
def test_what_the_lean_reader_accepts_click_reads_the_same(tokens: list[str]) -> None:
    lean = argv.parse(tokens)
    if lean is not None:
        assert lean == by_click(tokens), tokens


@given(command_lines())
def test_what_click_refuses_or_answers_itself_goes_to_click(tokens: list[str]) -> None:
    if by_click(tokens) is None:
        assert argv.parse(tokens) is None, tokens


def service_command_lines(config: Path) -> dict[str, list[str]]:
    """babblerd's flags as the files that start it write them: the systemd unit, the launchd
    plist, the NixOS module (its config file as `config`), and the lab."""
    unit = (ROOT / "systemd" / "babblerd.service").read_text()
    (exec_start,) = re.findall(r"^ExecStart=(.*)$", unit, re.MULTILINE)
    with (ROOT / "launchd" / "org.babbler.babblerd.plist").open("rb") as file:
        plist = plistlib.load(file)["ProgramArguments"]
    (nix,) = re.findall(r'ExecStart = "\$\{cfg.package\}/bin/babblerd(.*)";', NIX.read_text())
    lab = Lab("t", "ring", nodes=[Node(1, "bbl-t-n1", "/run/babbler-lab/t/n1")])
    return {
        "systemd": shlex.split(exec_start)[1:],
        "launchd": plist[1:],
        "nix": shlex.split(nix.replace("${configFile}", str(config))),
        "lab": lab.daemon_command_line(lab.nodes[0], ["--mode", "on-demand"]),
    }


def test_the_command_lines_of_the_lab_and_the_services_take_the_lean_path(tmp_path: Path) -> None:
    config = tmp_path / "babblerd.toml"
    config.write_text("")
    lines = service_command_lines(config)
    assert lines["nix"] == ["--config", str(config)]  # the file read, the substitution made
    for where, tokens in lines.items():
        assert argv.parse(tokens) is not None, (where, tokens)
        assert argv.parse(tokens) == by_click(tokens), (where, tokens)
    assert argv.parse(["--mode", "ON-DEMAND"]) == (None, {"mode": "on-demand"})
    assert argv.parse(["--interface", "a", "--interface=b"]) == (None, {"interface": ("a", "b")})


def test_a_config_path_that_is_a_directory_is_clicks_to_refuse(tmp_path: Path) -> None:
    assert argv.parse(["--config", str(tmp_path)]) is None
    assert by_click(["--config", str(tmp_path)]) is None
