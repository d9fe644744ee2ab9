"""What babbler-lab prints, as text: its lines name the lab once ("lab:" for the default lab,
not "lab lab:"), and no path or hyphenated word in any --help is broken over two lines, at
any usual terminal width."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from babbler import lab
from babbler.lab import cli
from tests import needs

# /run/babbler-lab/NAME, bbl-NAME-n1, --key-file: what click's wrapper broke at a hyphen
WHOLE = re.compile(r"(?:/|--)?\w[\w.*]*(?:[/-][\w.*]+)+")


def commands() -> list[str]:
    return ["", *sorted(cli.main.commands)]


def help_text(command: click.Command) -> str:
    said = [command.help or ""]
    said += [p.help or "" for p in command.params if isinstance(p, click.Option)]
    return " ".join(said)


@pytest.mark.parametrize("width", [60, 72, 80])
@pytest.mark.parametrize("name", commands())
def test_no_path_in_the_help_is_broken_over_two_lines(name: str, width: int) -> None:
    command = cli.main.commands[name] if name else cli.main
    whole = set(WHOLE.findall(help_text(command)))
    assert name or "/run/babbler-lab/NAME" in whole, whole
    shown = CliRunner().invoke(cli.main, [*name.split(), "--help"], terminal_width=width)
    assert shown.exit_code == 0, shown.output
    words = set(shown.output.split())
    broken = sorted(w for w in whole if not any(w in word for word in words))
    assert not broken, f"babbler-lab {name} --help breaks {broken}:\n{shown.output}"


def test_the_default_lab_s_down_says_lab_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`babbler-lab down` with no --name: "lab: not up", where it said "lab lab: not up"."""
    needs.root("babbler-lab runs only as root")
    monkeypatch.setattr(lab, "LAB_ROOT", tmp_path / "labs")  # no lab is up there
    monkeypatch.delenv("BABBLER_LAB", raising=False)
    said = CliRunner().invoke(cli.main, ["down"])
    assert said.exit_code == 0 and said.output == "lab: not up (nothing to take down)\n", said
    said = CliRunner().invoke(cli.main, ["--name", "x1", "down"])
    assert said.output == "lab x1: not up (nothing to take down)\n", said.output
