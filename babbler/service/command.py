"""`babblerd install-system-daemon [--force] [babblerd flags...]`,
`babblerd uninstall-system-daemon [--purge]` and `babblerd system-daemon-status [--json]`:
read here, done by systemd.py (Linux) or launchd.py (macOS), chosen by the platform as
babblerd chooses it (`--platform`, else BABBLER_PLATFORM as in the macOS lab, else the
running system's). babblerd's command line (daemon/cli.py) routes these words here before
anything of the daemon is imported.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from types import ModuleType

import click

from babbler.core.config import merge
from babbler.core.errors import BabblerError, ConfigError
from babbler.core.platform import MACOS, PLATFORMS, RUNNING, SYSTEM_NAME, Platform
from babbler.daemon.argv import SUBCOMMANDS
from babbler.daemon.cli_command import run_click
from babbler.service import launchd, plan, systemd
from babbler.service.program import this_program

PLATFORM_VARIABLE = "BABBLER_PLATFORM"  # the macOS lab's nodes set it (lab/macos/node.py)
# Flags a service fixes itself: its directories (the unit's RuntimeDirectory and
# StateDirectory, the plist's defaults) and the file install writes.
FIXED = ("run-dir", "state-dir")


def _say(line: str) -> None:
    click.echo(line)


def _chosen(given: str | None) -> Platform:
    """The platform to install for: the flag, else $BABBLER_PLATFORM, else this system's.
    Raises ConfigError."""
    word = given or os.environ.get(PLATFORM_VARIABLE)
    if word:
        platform = PLATFORMS.get(word.lower())
        if platform is None:
            raise ConfigError(f"platform: expected one of {', '.join(PLATFORMS)}, got {word!r}")
        return platform
    if RUNNING is None:
        raise ConfigError(f"{SYSTEM_NAME} is not supported (Linux and macOS are)")
    return RUNNING


def _backend(platform: Platform) -> ModuleType:
    return launchd if platform is MACOS else systemd


platform_option = click.option(
    "--platform",
    type=click.Choice(tuple(PLATFORMS), case_sensitive=False),
    envvar=PLATFORM_VARIABLE,
    help="install for this platform [default: this system's; the macOS lab sets macos]",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def group() -> None:
    """babblerd as a system service."""


@group.command(
    SUBCOMMANDS[0],
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
)
@click.option("--force", is_flag=True, help="replace a config file edited by hand")
@click.argument("flags", nargs=-1, type=click.UNPROCESSED)
def install_command(force: bool, flags: tuple[str, ...]) -> None:
    """Install babblerd as a service running with FLAGS (any of babblerd's: --key-file F,
    --ipv4-prefix P, --exclude eth0, ...), or bring it up to date; start it and wait.

    Linux: the system user, the shipped unit, drop-ins for the key (a credential) and
    the IPv4 prefix, /etc/babbler/babblerd.toml from the flags. macOS: the LaunchDaemon.
    Run again: changes only what differs, and says what.
    """
    from babbler.daemon.cli_command import parse  # babblerd's own flags, its own errors

    config, given = parse(list(flags))
    if config is not None:
        raise ConfigError(
            f"--config: install writes {plan.CONFIG_FILE}; give its settings as flags"
        )
    for key in FIXED:
        if key in given:
            raise ConfigError(f"--{key}: a service keeps babblerd's default directories")
    merge({}, given)  # every value checked before anything is touched
    platform = _chosen(given.get("platform"))
    if "key-file" in given:  # the service reads it from elsewhere than this shell's cwd
        given["key-file"] = os.path.abspath(given["key-file"])
    request = plan.Request(flags=given, force=force, program=this_program())
    sys.exit(_backend(platform).install(request, _say))


@group.command(SUBCOMMANDS[1])
@click.option("--purge", is_flag=True, help="also the system user, the state dir, /etc/babbler")
@platform_option
def uninstall_command(purge: bool, platform: str | None) -> None:
    """Stop babblerd and remove what install added (babblerd puts the host's settings
    back as on any stop). The system user and the state dir stay, so a reinstall keeps
    the node id, unless --purge."""
    sys.exit(_backend(_chosen(platform)).uninstall(purge, _say))


@group.command(SUBCOMMANDS[2])
@click.option("--json", "as_json", is_flag=True, help="one JSON object")
@platform_option
def status_command(as_json: bool, platform: str | None) -> None:
    """Installed or not, where, which version, running or not. Exit 0 when installed and
    running, else 1."""
    found: plan.Status = _backend(_chosen(platform)).status()
    if as_json:
        click.echo(json.dumps(found.as_json()))
    else:
        for line in found.lines():
            click.echo(line)
    sys.exit(0 if found.installed and found.running else 1)


def run(args: Sequence[str]) -> None:
    """babblerd's subcommand `args` (the first word one of SUBCOMMANDS); exits."""
    try:
        run_click(group, list(args))
    except ConfigError as error:
        click.echo(f"babblerd: {error}", err=True)
        sys.exit(2)
    except BabblerError as error:
        click.echo(f"babblerd: {error}", err=True)
        sys.exit(1)
    sys.exit(0)
