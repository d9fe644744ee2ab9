"""`babblerctl top`: being built (issue 34)."""

from __future__ import annotations

from pathlib import Path

import click

from babbler.core.errors import BabblerError
from babbler.ctl.options import socket_of, socket_option
from babbler.ui.command import run_command


@click.command("top")
@socket_option
@click.pass_context
def command(ctx: click.Context, socket_path: Path | None) -> None:
    """Not yet: being built."""

    def go() -> None:
        raise BabblerError(f"babblerctl top is not built yet ({socket_of(ctx, socket_path)})")

    run_command("babblerctl", go)
