"""What every babblerctl command shares: the public socket it reads (`--socket` before or
after the subcommand, env BABBLER_SOCKET)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from babbler.core.platform import DEFAULT_RUN_DIR, SOCKET_NAME

DEFAULT_SOCKET = DEFAULT_RUN_DIR / SOCKET_NAME
SOCKET_HELP = f"babblerd's public socket [env BABBLER_SOCKET; default: {DEFAULT_SOCKET}]"


def socket_option(command: Callable[..., Any]) -> Callable[..., Any]:
    """`--socket` after the subcommand too (before it, it is the group's option)."""
    return click.option(
        "--socket", "socket_path", type=click.Path(path_type=Path), default=None, help=SOCKET_HELP
    )(command)


def socket_of(ctx: click.Context, given: Path | None) -> Path:
    """The socket a command reads: its own --socket, else the group's, else the default."""
    if given is not None:
        return given
    chosen: Path = ctx.find_root().params.get("socket_path") or DEFAULT_SOCKET
    return chosen
