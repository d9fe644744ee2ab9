"""`babblerctl`: read a babblerd's state from its public socket (no root needed)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from babbler import __version__
from babbler.client import Connection
from babbler.config import SOCKET_NAME
from babbler.errors import BabblerError
from babbler.platform import DEFAULT_RUN_DIR

DEFAULT_SOCKET = DEFAULT_RUN_DIR / SOCKET_NAME


def _table(rows: list[list[str]], headers: list[str]) -> list[str]:
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows, strict=False)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return ["  " + fmt.format(*headers).rstrip()] + ["  " + fmt.format(*r).rstrip() for r in rows]


def _text(value: Any) -> str:
    return "-" if value is None else str(value)


def render_status(s: dict[str, Any]) -> str:
    """The status object as a person reads it."""
    b = s.get("babeld") or {}
    lines = [
        f"node {s['node_id']}  range {s['range']}",
        f"mode {s['mode']}  mesh {s['mesh']}  clients {s['clients']}",
        f"babeld {_text(b.get('version'))}  pid {_text(b.get('pid'))}  "
        f"restarts {b.get('restarts', 0)}",
    ]
    if b.get("last_error"):
        lines.append(f"  last error: {b['last_error']}")
    lines.append("")
    if s["interfaces"]:
        lines.append("interfaces")
        addresses = {a["interface"]: a["address"] for a in s["addresses"]}
        lines += _table(
            [
                [
                    i["name"],
                    i["kind"],
                    "up" if i["up"] else "down",
                    "yes" if i["babel"] else "no",
                    addresses.get(i["name"], "-"),
                ]
                for i in s["interfaces"]
            ],
            ["NAME", "KIND", "STATE", "BABEL", "ADDRESS"],
        )
    else:
        lines.append("interfaces: none eligible")
    if s["neighbours"]:
        lines.append("neighbours")
        lines += _table(
            [
                [n["address"], n["interface"], n["reach"], _text(n["cost"]), _text(n["rtt"])]
                for n in s["neighbours"]
            ],
            ["ADDRESS", "IF", "REACH", "COST", "RTT"],
        )
    else:
        lines.append("neighbours: none")
    installed = sorted((r for r in s["routes"] if r["installed"]), key=lambda r: r["prefix"])
    if installed:
        lines.append("routes")
        rows = [
            [r["prefix"], _text(r["metric"]), _text(r["via"]), _text(r["interface"])]
            for r in installed
        ]
        lines += _table(rows, ["PREFIX", "METRIC", "VIA", "IF"])
    else:
        lines.append("routes: none installed")
    others = len(s["routes"]) - len(installed)
    if others:
        noun = "route" if others == 1 else "routes"
        lines.append(f"  ({others} more {noun} not installed: babblerctl status --json)")
    return "\n".join(lines)


socket_option = click.option(
    "--socket",
    "socket_path",
    type=click.Path(path_type=Path),
    default=DEFAULT_SOCKET,
    show_default=True,
    help="babblerd's public socket",
)


def run_command(prog: str, fn: Callable[[], object]) -> None:
    """Run a command's body; a BabblerError or OSError becomes one line on stderr and exit 1,
    a closed pipe or Ctrl-C a quiet exit 0."""
    try:
        fn()
    except (BabblerError, OSError) as error:
        if isinstance(error, BrokenPipeError):
            sys.exit(0)
        click.echo(f"{prog}: {error}", err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(0)


def _run(fn: Callable[[], object]) -> None:
    run_command("babblerctl", fn)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="babblerctl")
def main() -> None:
    """Read the state of a running babblerd: addresses, neighbours, routes, live changes."""


@main.command()
@socket_option
@click.option("--json", "as_json", is_flag=True, help="print the status object as JSON")
def status(socket_path: Path, as_json: bool) -> None:
    """Show the node's state (never starts an on-demand mesh)."""

    def go() -> None:
        with Connection(socket_path) as conn:
            value = json.loads(conn.request("status")[0])
        click.echo(json.dumps(value, indent=2) if as_json else render_status(value))

    _run(go)


@main.command()
@socket_option
def stats(socket_path: Path) -> None:
    """Show the daemon process's own tasks, open files and memory, as JSON."""

    def go() -> None:
        with Connection(socket_path) as conn:
            click.echo(json.dumps(json.loads(conn.request("stats")[0]), indent=2))

    _run(go)


@main.command()
@socket_option
def dump(socket_path: Path) -> None:
    """Print babeld's table as babeld lines.

    Never starts an on-demand mesh.
    """

    def go() -> None:
        with Connection(socket_path) as conn:
            for line in conn.request("dump"):
                click.echo(line)

    _run(go)


def _stream(socket_path: Path, request: str) -> None:
    with Connection(socket_path, timeout=None) as conn:
        conn.send(request)
        for line in conn.lines():
            click.echo(line)
            if line.startswith(("no ", "bad")):
                raise BabblerError(f"babblerd said: {line}")


@main.command()
@socket_option
def monitor(socket_path: Path) -> None:
    """Follow babeld's table, live, in babeld's line format.

    Prints the table, then add/change/flush lines. Keeps an on-demand mesh up while it runs.
    """
    _run(lambda: _stream(socket_path, "monitor"))


@main.command()
@socket_option
def watch(socket_path: Path) -> None:
    """Follow the node's state as JSON events.

    Prints a snapshot, then one event per line. Keeps an on-demand mesh up while it runs.
    """
    _run(lambda: _stream(socket_path, "watch"))


if __name__ == "__main__":
    main()
