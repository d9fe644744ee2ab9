"""What every user-side command shares: a failure is one line and exit 1, a usage error
(a bad choice, a missing option, a typo) one line and exit 2, a file written whole or not at
all, and pictures drawn with Graphviz's `dot`."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

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


def usage_line(error: click.UsageError, prog: str) -> str:
    """A usage error as one line (click prints three, and a choice missing as a list of
    tab-indented lines): `prog: what is wrong (see COMMAND --help)`."""
    path = error.ctx.command_path if error.ctx is not None else prog
    root = path.split()[0] if path else prog
    message = " ".join(error.format_message().split()).removesuffix(".")  # one line, always
    return f"{root}: {message} (see {path} --help)"


def print_usage_error(error: click.UsageError, prog: str) -> None:
    """The usage error on stderr as one line (escaped: it may quote a word from the command
    line), then exit with click's code (2)."""
    click.echo(escape(usage_line(error, prog)), err=True)
    sys.exit(error.exit_code)


def click_result(start: Callable[[], Any], prog: str) -> Any:
    """What `start` (a click command's main, not standalone) returns; its errors and Ctrl-C
    end the process here with click's exit code, as click's standalone mode would, but a
    usage error in one line (usage_line)."""
    try:
        return start()
    except click.UsageError as error:
        print_usage_error(error, prog)
    except click.ClickException as error:
        error.show()
        sys.exit(error.exit_code)
    except click.Abort:
        click.echo("Aborted!", err=True)
        sys.exit(1)


class OneLineErrors(click.Group):
    """A click group whose usage errors are one line (usage_line), as every other failure."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        if not kwargs.get("standalone_mode", True):
            return super().main(*args, **kwargs)
        done = {**kwargs, "standalone_mode": False}
        code = click_result(lambda: super(OneLineErrors, self).main(*args, **done), self.name or "")
        sys.exit(code if isinstance(code, int) else 0)


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


def write_whole(text: str, output: Path) -> None:
    """Write `text` to `output` whole or not at all (a job must never read half a hostfile,
    nor a browser half a picture): into a hidden file beside it, then renamed over it.
    Raises BabblerError in one line naming `output` and what to do; nothing is left behind."""
    partial = output.with_name(f".{output.name}.partial")
    try:
        partial.write_text(text)
        partial.replace(output)
    except OSError as error:
        with contextlib.suppress(OSError):
            partial.unlink()
        raise BabblerError(f"cannot write {output}: {_why(error, output)}") from None


def _why(error: OSError, output: Path) -> str:
    if error.errno == errno.ENOENT:
        return f"no such directory {output.parent} (make it first)"
    if error.errno in (errno.EACCES, errno.EPERM):
        return f"permission denied in {output.parent}"
    if error.errno == errno.ENOTDIR:
        return f"{output.parent} is not a directory"
    if error.errno == errno.EISDIR:
        return "it is a directory"
    return error.strerror or os.strerror(error.errno or 0) or str(error)
