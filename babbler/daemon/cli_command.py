"""`babblerd`'s command line as click reads it: help, version and every error message.

A plain command line never gets here: cli.py reads it with argv.py, 12 ms sooner. This
module answers the rest (`--help`, `--version`, completion, typos, bad choices) or returns
what click read, and cli.py starts the daemon from it: one start path, whichever reader.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from babbler import __version__
from babbler.core.config import BY_ATTR, DEFAULT_CONFIG, SETTINGS

EPILOG = """\b
Examples:
  sudo babblerd                          physical Ethernet/Thunderbolt links, mesh always up
  sudo babblerd --mode on-demand         mesh up only while a local program subscribes
  sudo babblerd --key-file /etc/babbler/mesh.key   only nodes with this key are neighbours
  sudo babblerd --interface 'veth*'      exactly these links, whatever their kind
Every flag has a key of the same name in the config file (TOML), e.g. hello-interval = 0.5.
As a service: sudo babblerd install-system-daemon [--key-file F] [flags...];
uninstall-system-daemon [--purge]; system-daemon-status [--json] (each takes --help).
Signals: SIGTERM/SIGINT stop (babeld stopped, addresses removed); SIGHUP reloads the file.
"""

F = TypeVar("F", bound=Callable[..., Any])


def setting_options(command: F) -> F:
    """One click option per setting of config.SETTINGS, in the table's order."""
    for setting in reversed(SETTINGS):
        kind: dict[str, Any] = {"help": setting.help}
        if setting.switch:
            kind |= {"is_flag": True, "default": None}
        elif setting.choices:
            kind["type"] = click.Choice(setting.choices, case_sensitive=False)
        else:
            kind["metavar"] = setting.metavar
        if setting.repeatable:
            kind["multiple"] = True
        command = click.option(f"--{setting.key}", setting.attr, **kind)(command)
    return command


@click.command(context_settings={"help_option_names": ["-h", "--help"]}, epilog=EPILOG)
@click.option(
    "--config",
    type=click.Path(dir_okay=False, path_type=Path),
    help=f"TOML config file [default: {DEFAULT_CONFIG}, if present]",
)
@setting_options
@click.version_option(__version__, prog_name="babblerd")
def main(config: Path | None, **given: Any) -> tuple[Path | None, dict[str, Any]]:
    """Give each wired link a mesh address and route between nodes with babeld.

    Serves the node's state, babeld's table and live changes on <run-dir>/babblerd.sock
    (read it with babblerctl).
    """
    return config, flags_given(given)


def run_click(command: click.Command, args: list[str]) -> Any:
    """What `command` returns for `args`; click's errors and Ctrl-C end the process here
    with click's exit code, as its standalone mode would: a usage error (a bad choice, a
    typo) in one line, as babblerd's own flag errors are (ui/command.py)."""
    from babbler.ui.command import click_result  # the slow path: help, errors, completion

    return click_result(
        lambda: command.main(args, prog_name="babblerd", standalone_mode=False), "babblerd"
    )


def parse(args: list[str]) -> tuple[Path | None, dict[str, Any]]:
    """The config file and the flags given in `args`, as click reads them. Help, version,
    shell completion and every error end the process here, as click's own main would."""
    result = run_click(main, args)
    if not isinstance(result, tuple):  # --help, --version: click printed it
        sys.exit(result or 0)
    config, flags = result
    return config, flags


def flags_given(params: dict[str, Any]) -> dict[str, Any]:
    """click's parameters as the flags cli.start takes: setting keys, only those given."""
    return {
        BY_ATTR[name].key: value
        for name, value in params.items()
        if value is not None and value != ()
    }
