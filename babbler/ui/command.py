"""What every user-side command shares: a failure is one line and exit 1, and pictures are
drawn with Graphviz's `dot`."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import click

from babbler.core.errors import BabblerError
from babbler.core.printable import escape


def run_command(prog: str, fn: Callable[[], object]) -> None:
    """Run a command's body; a BabblerError or OSError becomes one line on stderr (escaped:
    core/printable.py) and exit 1, a closed pipe or Ctrl-C a quiet exit 0."""
    try:
        fn()
    except (BabblerError, OSError) as error:
        if isinstance(error, BrokenPipeError):
            sys.exit(0)
        click.echo(escape(f"{prog}: {error}"), err=True)  # it may name another machine's node
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(0)


def versioned(group: click.Group, prog: str, version: str) -> None:
    """`--version` on every subcommand too (`babblerctl status --version`), as on the group."""

    def show(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
        if value and not ctx.resilient_parsing:
            click.echo(f"{prog}, version {version}")
            ctx.exit()

    for command in group.commands.values():
        if not any("--version" in p.opts for p in command.params if isinstance(p, click.Option)):
            command.params.append(
                click.Option(
                    ["--version"],
                    is_flag=True,
                    expose_value=False,
                    is_eager=True,
                    callback=show,
                    help="Show the version and exit.",
                )
            )


def render_svg(dot: str, out: Path) -> None:
    """Draw DOT into an SVG file with Graphviz's `dot`. Raises BabblerError."""
    program = shutil.which("dot")
    if program is None:
        raise BabblerError("Graphviz's dot is not installed (Debian: apt-get install graphviz)")
    done = subprocess.run(
        [program, "-Tsvg", "-o", str(out)], input=dot, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise BabblerError(f"dot failed: {done.stderr.strip() or done.returncode}")
