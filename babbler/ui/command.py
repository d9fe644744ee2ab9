"""What every user-side command shares: a failure is one line and exit 1, a usage error
(a bad choice, a missing option, a typo) one line and exit 2, a file written whole or not at
all, and pictures drawn with Graphviz's `dot`."""

from __future__ import annotations

import errno
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from babbler.core.errors import BabblerError
from babbler.core.printable import escape
from babbler.host.whole import replace_whole


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


FILE_MODE = 0o644  # whoever reads it (a job's user, node_exporter) may not be its writer


def write_whole(data: str | bytes, output: Path) -> None:
    """Replace `output` with `data` (text as UTF-8; mode 0644) whole or not at all
    (host/whole.py): a job must never read half a hostfile, nor node_exporter half a metrics
    file. Raises BabblerError in one line naming `output` and what to do."""
    raw = data.encode() if isinstance(data, str) else data
    try:
        replace_whole(output, raw, FILE_MODE)
    except OSError as error:
        raise _cannot_write(output, error) from None


def _cannot_write(output: Path, error: OSError) -> BabblerError:
    """Why, said the way people name it, of the file and directory they asked for (the
    temporary file is ours, not theirs to know)."""
    where = output.parent
    reasons = {
        errno.ENOENT: f"no such directory {where} (make it first)",
        errno.ENOTDIR: f"{where} is not a directory",
        errno.EISDIR: "it is a directory",
        errno.EACCES: f"permission denied in {where}",
        errno.EPERM: f"permission denied in {where}",
        errno.EROFS: "read-only file system",
        errno.ENOSPC: "no space left on the device",
    }
    why = reasons.get(error.errno or 0) or (error.strerror or str(error)).lower()
    return BabblerError(f"cannot write {output}: {why}")
