"""`babblerctl`: read a babblerd's state from its public socket (no root needed)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from babbler import __version__
from babbler.client import Client, Connection, Status
from babbler.core.errors import BabblerError
from babbler.core.graph import Graph, to_dot
from babbler.core.platform import DEFAULT_RUN_DIR, SOCKET_NAME

DEFAULT_SOCKET = DEFAULT_RUN_DIR / SOCKET_NAME


def _table(rows: list[list[str]], headers: list[str]) -> list[str]:
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows, strict=False)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return ["  " + fmt.format(*headers).rstrip()] + ["  " + fmt.format(*r).rstrip() for r in rows]


def _text(value: Any) -> str:
    return "-" if value is None else str(value)


def _speed(mbps: int | None) -> str:
    if mbps is None:
        return "-"
    return f"{mbps / 1000:g}G" if mbps >= 1000 else f"{mbps}M"


def _next_hops(s: Status) -> dict[str, str]:
    """Node id -> the name (or id) of the neighbour babeld's route to it goes through: the
    route's `via` and link, looked up among `status.neighbours` (which say their node id)."""
    names = {n.node_id: n.label for n in s.nodes}
    neighbour = {(m.address, m.interface): m.node_id for m in s.neighbours}
    out = {}
    for node in s.nodes:
        hop = neighbour.get((node.via, node.interface)) if node.reachable else None
        if hop is not None:
            out[node.node_id] = names.get(hop, hop)
    return out


def render_nodes(s: Status) -> list[str]:
    """The other nodes, a line each (status's `nodes`)."""
    if not s.nodes:
        return ["nodes: no other node known yet"]
    speeds = {i.name: i.speed_mbps for i in s.interfaces}
    hops = _next_hops(s)
    rows = [
        [
            _text(n.name),
            n.node_id,
            n.node_address,
            _text(n.hops),
            _text(n.metric) if n.reachable else "unreachable",
            _text(n.interface),
            _speed(speeds.get(n.interface)) if n.interface else "-",
            hops.get(n.node_id, "-"),
            "-" if n.info_age_s is None else f"{n.info_age_s:.0f}s",
        ]
        for n in s.nodes
    ]
    headers = [
        "NAME", "NODE ID", "ADDRESS", "HOPS", "METRIC", "LINK", "SPEED", "NEXT HOP", "INFO AGE"
    ]  # fmt: skip
    return ["nodes", *_table(rows, headers)]


def render_path(s: Status, what: str) -> str:
    """The path to a node, hop by hop with names, links and costs, from the graph the node
    infos give; checked against babeld's route (its first link and neighbour)."""
    graph = Graph.from_status(s.raw)
    by_address = {n.node_address: n.node_id for n in s.nodes}
    target = graph.find(what) or by_address.get(what)
    if target is None:
        raise BabblerError(f"no node {what!r} (a name, node id or node address: babblerctl nodes)")
    if target == graph.me:
        return f"{graph.names[target]} is this node"
    node = next((n for n in s.nodes if n.node_id == target), None)
    if node is None:  # in someone's info, not routed from here
        raise BabblerError(f"no route to {graph.names[target]} (babblerctl nodes)")
    steps = graph.path(target, first=node.interface if node.reachable else None)
    if steps is None:
        raise BabblerError(f"no path to {graph.names[target]} in what the node infos say")
    lines = [
        f"{graph.names[graph.me]} -> {graph.names[target]}: {len(steps)} "
        f"{'hop' if len(steps) == 1 else 'hops'}, cost {sum(e.cost for _, e in steps)}, "
        f"babeld's metric {_text(node.metric) if node.reachable else 'unreachable'}"
    ]
    for frm, edge in steps:
        lines.append(
            f"  {graph.names[frm]}  {_text(edge.interface)} (cost {edge.cost})  "
            f"-> {graph.names[edge.to]}"
        )
    first = steps[0][1]
    if node.reachable and node.interface != first.interface:
        lines.append(
            f"  note: babeld's route leaves by {node.interface}, not {first.interface}: "
            "the node infos are behind the routes (a node is asked again when its links change)"
        )
    return "\n".join(lines)


def render_status(s: Status) -> str:
    """The status as a person reads it."""
    b = s.babeld
    keyed = "keyed" if s.keyed else "open (no mesh key)"
    lines = [
        f"node {s.node_id}" + (f" ({s.name})" if s.name else "") + f"  address {s.node_address}",
        f"mode {s.mode}  mesh {s.mesh}  {keyed}  other clients {s.clients}",
        f"babeld {_text(b.version)}  pid {_text(b.pid)}  "
        f"restarts {b.restarts}  router id {_text(b.my_id)}",
    ]
    if not b.found:
        lines.append("  babeld NOT FOUND: install it (Debian: apt-get install babeld)")
    if b.last_error:
        lines.append(f"  last error: {b.last_error}")
    for pattern in s.raw.get("unmatched_globs") or []:
        lines.append(f"  --interface {pattern} matches no link")
    lines.append("")
    if s.interfaces:
        lines.append("interfaces")
        addresses = {a.interface: a.address for a in s.addresses}
        lines += _table(
            [
                [
                    i.name,
                    i.kind,
                    "up" if i.up else "down",
                    _speed(i.speed_mbps),
                    _text(i.cost),
                    "yes" if i.babel else "no",
                    addresses.get(i.name, "-"),
                ]
                for i in s.interfaces
            ],
            ["NAME", "KIND", "STATE", "SPEED", "COST", "BABEL", "ADDRESS"],
        )
    else:
        lines.append("interfaces: none eligible")
    if s.neighbours:
        lines.append("neighbours")
        lines += _table(
            [
                [
                    _text(n.address),
                    _text(n.interface),
                    _text(n.reach),
                    _text(n.cost),
                    "-" if n.rtt is None else f"{n.rtt:.3f} ms",
                ]
                for n in s.neighbours
            ],
            ["ADDRESS", "IF", "REACH", "COST", "RTT"],
        )
    else:
        lines.append("neighbours: none")
    installed = sorted((r for r in s.routes if r.installed), key=lambda r: r.prefix or "")
    if installed:
        lines.append("routes")
        rows = [
            [_text(r.prefix), _text(r.metric), _text(r.via), _text(r.interface)] for r in installed
        ]
        lines += _table(rows, ["PREFIX", "METRIC", "VIA", "IF"])
    else:
        lines.append("routes: none installed")
    others = len(s.routes) - len(installed)
    if others:
        noun = "route" if others == 1 else "routes"
        lines.append(f"  ({others} more {noun} not installed: babblerctl status --json)")
    lines += render_nodes(s)
    return "\n".join(lines)


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


SOCKET_HELP = f"babblerd's public socket [env BABBLER_SOCKET; default: {DEFAULT_SOCKET}]"


def socket_option(command: Callable[..., Any]) -> Callable[..., Any]:
    """`--socket` after the subcommand too (before it, it is the group's option)."""
    return click.option(
        "--socket", "socket_path", type=click.Path(path_type=Path), default=None, help=SOCKET_HELP
    )(command)


def _socket(ctx: click.Context, given: Path | None) -> Path:
    if given is not None:
        return given
    chosen: Path = ctx.find_root().params.get("socket_path") or DEFAULT_SOCKET
    return chosen


@click.group(context_settings={"help_option_names": ["-h", "--help"]}, invoke_without_command=True)
@click.option(
    "--socket",
    "socket_path",
    type=click.Path(path_type=Path),
    envvar="BABBLER_SOCKET",
    default=None,
    help=SOCKET_HELP,
)
@click.version_option(__version__, prog_name="babblerctl")
@click.pass_context
def main(ctx: click.Context, socket_path: Path | None) -> None:
    """Read the state of a running babblerd: addresses, neighbours, routes, live changes.

    With no command, `status`.
    """
    if ctx.invoked_subcommand is None:
        ctx.invoke(status, socket_path=None, as_json=False)


def _client(ctx: click.Context, socket_path: Path | None) -> Client:
    """The client of the socket this command was given."""
    return Client(_socket(ctx, socket_path))


@main.command()
@socket_option
@click.option("--json", "as_json", is_flag=True, help="print the status object as JSON")
@click.pass_context
def status(ctx: click.Context, socket_path: Path | None, as_json: bool) -> None:
    """Show the node's state (never starts an on-demand mesh)."""

    def go() -> None:
        value = _client(ctx, socket_path).status()
        click.echo(json.dumps(value.raw, indent=2) if as_json else render_status(value))

    _run(go)


@main.command()
@socket_option
@click.option("--json", "as_json", is_flag=True, help="print status's `nodes` list as JSON")
@click.pass_context
def nodes(ctx: click.Context, socket_path: Path | None, as_json: bool) -> None:
    """List the other machines of the mesh: name, node id and address, route metric, the
    first link and its speed, the next-hop node, and how old their info is. Nodes that lost
    their route in the last 10 minutes are listed as unreachable."""

    def go() -> None:
        value = _client(ctx, socket_path).status()
        if as_json:
            click.echo(json.dumps([n.raw for n in value.nodes], indent=2))
        else:
            click.echo("\n".join(render_nodes(value)))

    _run(go)


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


@main.command()
@socket_option
@click.option(
    "--svg",
    "svg",
    type=click.Path(path_type=Path, dir_okay=False),
    help="draw it into this SVG file with Graphviz instead of printing DOT",
)
@click.pass_context
def graph(ctx: click.Context, socket_path: Path | None, svg: Path | None) -> None:
    """Print the mesh as a Graphviz DOT graph: machines (this one in bold), each link once
    with its names at both ends and its speed."""

    def go() -> None:
        dot = to_dot(Graph.from_status(_client(ctx, socket_path).status().raw))
        if svg is None:
            click.echo(dot, nl=False)
        else:
            render_svg(dot, svg)
            click.echo(f"wrote {svg}")

    _run(go)


@main.command()
@socket_option
@click.argument("node")
@click.pass_context
def path(ctx: click.Context, socket_path: Path | None, node: str) -> None:
    """Show the path to NODE (a name, node id or node address) hop by hop: each node, the
    link it leaves by and its cost, from the node infos, checked against babeld's route."""
    _run(lambda: click.echo(render_path(_client(ctx, socket_path).status(), node)))


@main.command()
@socket_option
@click.option("--all", "show_all", is_flag=True, help="also each link's own address")
@click.pass_context
def ip(ctx: click.Context, socket_path: Path | None, show_all: bool) -> None:
    """Print this node's address: the machine's one stable address, reachable while any
    path to it exists, whichever cable is pulled."""

    def go() -> None:
        value = _client(ctx, socket_path).status()
        click.echo(value.node_address)
        if show_all:
            for entry in value.addresses:
                click.echo(f"{entry.address}  {entry.interface}")

    _run(go)


@main.command()
@socket_option
@click.pass_context
def stats(ctx: click.Context, socket_path: Path | None) -> None:
    """Show the daemon process's own tasks, open files and memory, as JSON."""
    _run(lambda: click.echo(json.dumps(_client(ctx, socket_path).stats(), indent=2)))


@main.command()
@socket_option
@click.pass_context
def dump(ctx: click.Context, socket_path: Path | None) -> None:
    """Print babeld's table as babeld lines.

    Never starts an on-demand mesh.
    """

    def go() -> None:
        for line in _client(ctx, socket_path).request("dump"):
            click.echo(line)

    _run(go)


def _stream(socket_path: Path, request: str) -> None:
    with Connection(socket_path) as conn:
        conn.settimeout(None)  # a quiet mesh sends nothing for hours
        conn.send(request)
        for line in conn.lines():
            click.echo(line)


@main.command()
@socket_option
@click.pass_context
def monitor(ctx: click.Context, socket_path: Path | None) -> None:
    """Follow babeld's table, live, in babeld's line format.

    Prints the table, then add/change/flush lines. Keeps an on-demand mesh up while it runs.
    """
    _run(lambda: _stream(_socket(ctx, socket_path), "monitor"))


@main.command()
@socket_option
@click.pass_context
def watch(ctx: click.Context, socket_path: Path | None) -> None:
    """Follow the node's state as JSON events.

    Prints a snapshot, then one event per line. Keeps an on-demand mesh up while it runs.
    """
    _run(lambda: _stream(_socket(ctx, socket_path), "watch"))


def _size(text: str) -> int:
    """`1G`, `64M`, `16K`, `4096` -> bytes (powers of 1024)."""
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1)
    try:
        value = int(text[:-1] if scale > 1 else text) * scale
    except ValueError:
        raise click.BadParameter(
            f"{text!r} is not a size like 64M or 1G", param_hint="--max-size"
        ) from None
    if not 1024 <= value <= 1 << 30:
        raise click.BadParameter("from 1K to 1G", param_hint="--max-size")
    return value


@main.command()
@socket_option
@click.argument("node", required=False)
@click.option("--all", "every", is_flag=True, help="every reachable node in turn, one table")
@click.option(
    "--ring",
    is_flag=True,
    help="every node (this one too, in name order) sends to the next at the same time",
)
@click.option(
    "--duration",
    type=click.FloatRange(0.2, 30.0),
    default=3.0,
    show_default=True,
    help="seconds of each throughput test (each way; the ring's)",
)
@click.option(
    "--sweep/--no-sweep",
    default=None,
    help="message sizes from 1 KiB to --max-size, a time each [default: on for one node]",
)
@click.option("--max-size", default="1G", show_default=True, help="the sweep's largest message")
@click.option(
    "--port", type=click.IntRange(1, 65535), default=6699, show_default=True, help="responder port"
)
@click.option("--json", "as_json", is_flag=True, help="print the results as JSON")
@click.option(
    "--svg",
    type=click.Path(path_type=Path, dir_okay=False),
    help="draw throughput against message size into this SVG file (implies --sweep)",
)
@click.pass_context
def bench(
    ctx: click.Context,
    socket_path: Path | None,
    node: str | None,
    every: bool,
    ring: bool,
    duration: float,
    sweep: bool | None,
    max_size: str,
    port: int,
    as_json: bool,
    svg: Path | None,
) -> None:
    """Measure the links to NODE (a name, node id or node address) over TCP: round trips
    (p50, p99), throughput each way for --duration seconds, and one message of each size
    from 1 KiB to 1 GiB (time, GB/s), as the original's bandwidth bench. The other node's
    babblerd answers (its responder, on by default: babblerd --bench).

    --all measures every reachable node in turn (no sweep unless asked); --ring makes every
    node send to the next at once, as an all-gather does, to find the slow link. No root
    needed.
    """
    if sum((node is not None, every, ring)) != 1:
        raise click.UsageError("give one of NODE, --all or --ring")
    largest = _size(max_size)
    from babbler.bench.cli import run_bench

    _run(
        lambda: run_bench(
            _client(ctx, socket_path).status(),
            node,
            ring=ring,
            duration=duration,
            sweep=bool(sweep if sweep is not None else (node is not None or svg is not None)),
            largest=largest,
            port=port,
            as_json=as_json,
            svg=svg,
        )
    )


@main.command()
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
def keygen(file: Path) -> None:
    """Write a new random mesh key to FILE (mode 0600; an existing file is never replaced).

    Copy the same file to every node (root-owned, 0600) and start each babblerd with
    --key-file FILE: nodes without the key are then no neighbours.
    """
    from babbler.ctl.keygen import write_new_key

    def go() -> None:
        try:
            write_new_key(file)
        except FileExistsError:
            raise BabblerError(f"{file} exists; a key is never overwritten") from None
        click.echo(f"wrote a new mesh key to {file} (mode 0600)")

    _run(go)


if __name__ == "__main__":
    main()
