"""`babblerctl`: read a babblerd's state from its public socket (no root needed)."""

from __future__ import annotations

import dataclasses
import json
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path

import click

from babbler import __version__
from babbler.client import Client, Connection, NodeEvent
from babbler.client.backoff import Backoff
from babbler.client.errors import Disconnected
from babbler.client.sync import RETRIED
from babbler.core import hostfile, jobenv, mlxfile
from babbler.core.config import DEFAULT_BENCH_PORT
from babbler.core.errors import BabblerError
from babbler.core.graph import Graph, to_dot
from babbler.core.platform import DEFAULT_STATE_DIR, PLATFORMS
from babbler.ctl import hostfile as jobfiles
from babbler.ctl.options import SOCKET_HELP, socket_of, socket_option
from babbler.live import metrics as live_metrics
from babbler.live import top as live_top
from babbler.live import web as live_web
from babbler.ui import command, render
from babbler.ui.watchview import WatchView
from babbler.ui.watchview import as_json as as_json_line


def _run(fn: Callable[[], object]) -> None:
    command.run_command("babblerctl", fn)


@click.group(
    "babblerctl",
    cls=command.OneLineErrors,
    context_settings={"help_option_names": ["-h", "--help"]},
    invoke_without_command=True,
)
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
        ctx.invoke(status, socket_path=None, as_json=False, with_routes=False)


def _client(ctx: click.Context, socket_path: Path | None) -> Client:
    """The client of the socket this command was given."""
    return Client(socket_of(ctx, socket_path))


@main.command()
@socket_option
@click.option("--json", "as_json", is_flag=True, help="print the status object as JSON")
@click.option("--routes", "with_routes", is_flag=True, help="also every installed route")
@click.pass_context
def status(ctx: click.Context, socket_path: Path | None, as_json: bool, with_routes: bool) -> None:
    """Show the node's state: its links, neighbours and the other nodes (never starts an
    on-demand mesh)."""

    def go() -> None:
        value = _client(ctx, socket_path).status()
        shown = render.render_status(value, routes=with_routes)
        click.echo(json.dumps(value.raw, indent=2) if as_json else shown)

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
        if as_json:  # status's nodes, each with its next hop's name
            click.echo(json.dumps(render.nodes_json(value), indent=2))
        else:
            click.echo("\n".join(render.render_nodes(value)))

    _run(go)


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
    """Print the mesh as a Graphviz DOT graph: machines (this one in bold; one without a
    route from here dashed and grey, labelled unreachable), each link once with its names at
    both ends and its speed."""

    def go() -> None:
        dot = to_dot(Graph.from_status(_client(ctx, socket_path).status().raw))
        if svg is None:
            click.echo(dot, nl=False)
        else:
            command.render_svg(dot, svg)
            click.echo(f"wrote {svg}")

    _run(go)


@main.command()
@socket_option
@click.argument("node")
@click.option("--json", "as_json", is_flag=True, help="the path as JSON")
@click.pass_context
def path(ctx: click.Context, socket_path: Path | None, node: str, as_json: bool) -> None:
    """Show the path to NODE (a name, node id or any address of it) hop by hop: each node, the
    link it leaves by and its cost, from the node infos, checked against babeld's route.
    Exits 1 when there is none (a node cut off: when it was last seen)."""

    def go() -> None:
        value = _client(ctx, socket_path).status()
        if as_json:
            click.echo(json.dumps(render.path_of(value, node), indent=2))
        else:
            click.echo(render.render_path(value, node))

    _run(go)


@main.command()
@socket_option
@click.argument("node", required=False)
@click.option("-4", "v4", is_flag=True, help="IPv4: the IPv4 node address (what jobs like MLX use)")
@click.option("-6", "v6", is_flag=True, help="IPv6: the IPv6 node address (the default)")
@click.option(
    "--all",
    "show_all",
    is_flag=True,
    help="every address of the node, each named: its node addresses, each link's IPv6"
    " address and each cable's IPv4 one (-4 or -6: of that family only)",
)
@click.option("--json", "as_json", is_flag=True, help="every address of the node, as JSON")
@click.pass_context
def ip(
    ctx: click.Context,
    socket_path: Path | None,
    node: str | None,
    v4: bool,
    v6: bool,
    show_all: bool,
    as_json: bool,
) -> None:
    """Print this node's address, or NODE's (a name, node id in any case, or any of its
    addresses): the machine's one stable address, reachable while any path to it exists,
    whichever cable is pulled. IPv6 unless -4; -4 -6 prints both; --all every address of
    both families (another node's link addresses as its babeld announces them). Exits 1 with
    the reason when -4 asks for IPv4 and the node has none (IPv4 off or refused there, or
    its info not in yet)."""

    def go() -> None:
        value = _client(ctx, socket_path).status()
        target = render.node_id(value, node) if node is not None else value.node_id
        other = render.find_node(value, target)
        if as_json:
            click.echo(json.dumps(render.ip_json(value, other), indent=2))
        else:
            click.echo("\n".join(render.ip_lines(value, other, v4, v6, show_all)))

    _run(go)


@main.command(help=jobfiles.HELP)
@socket_option
@click.option(
    "--format",
    "form",
    type=click.Choice(list(jobfiles.FORMATS)),
    required=True,
    help="what to write (above)",
)
@click.option(
    "--backend",
    type=click.Choice(mlxfile.BACKENDS),
    default=None,
    help="mlx: the backend written into the file; auto chooses as mlx.distributed_config"
    " does (RDMA ready and a full mesh: jaccl; ready and a ring: jaccl-ring; else ring)"
    " and says why on stderr",
)
@click.option(
    "--nodes",
    "chosen",
    default=None,
    metavar="A,B,...",
    help="only these nodes (names, node ids or any of their addresses); default: every reachable"
    " node and this one. Selects, never orders",
)
@click.option(
    "--allow-hops",
    is_flag=True,
    help="mlx: when no ring through the cables exists, go over node addresses (through other"
    " nodes, slower) instead of refusing",
)
@click.option(
    "--ssh-names",
    is_flag=True,
    help="the `ssh` field holds the node's name (as --format hosts writes it) instead of its"
    " IPv4 node address",
)
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=None,
    help=f"torch, env: MASTER_PORT (default {hostfile.TORCH_PORT}); llama-rpc: rpc-server's"
    f" port (default {jobenv.LLAMA_RPC_PORT})",
)
@click.option(
    "--this",
    is_flag=True,
    help="torch: also NODE_RANK of the node this runs on and, on Linux, GLOO_SOCKET_IFNAME"
    " (--format env implies it)",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="write to FILE (replaced whole, only once complete) instead of standard output",
)
@click.pass_context
def hostfile_command(
    ctx: click.Context,
    socket_path: Path | None,
    form: str,
    backend: str | None,
    chosen: str | None,
    allow_hops: bool,
    ssh_names: bool,
    port: int | None,
    this: bool,
    output: Path | None,
) -> None:
    def go() -> None:
        value = _client(ctx, socket_path).status()
        made = jobfiles.build(
            value, form, chosen, backend, allow_hops, ssh_names, port, this, _host_names()
        )
        for line in made.stderr:
            click.echo(line, err=True)
        if output is None:
            click.echo(made.text, nl=False)
        else:
            command.write_whole(made.text, output)

    _run(go)


main.add_command(hostfile_command, "hostfile")


def _host_names() -> list[str]:
    """The names this host answers to (never given to a mesh node in hosts lines)."""
    name = socket.gethostname()
    return [name, name.split(".")[0], socket.getfqdn()]


@main.command(
    help="Show the daemon process's own tasks, open files and memory, and what it has done"
    " since it started. On a terminal each is named in words, memory in MiB; piped, or with"
    " --json, babblerd's own keys and numbers (docs/protocol.md). The lines:\n\n\b\n"
    + render.STATS_HELP
)
@socket_option
@click.option(
    "--json", "as_json", is_flag=True, help="as JSON (the default when stdout is not a terminal)"
)
@click.pass_context
def stats(ctx: click.Context, socket_path: Path | None, as_json: bool) -> None:

    def go() -> None:
        value = _client(ctx, socket_path).stats()
        if as_json or not sys.stdout.isatty():
            click.echo(json.dumps(value, indent=2))
        else:
            click.echo("\n".join(render.render_stats(value)))

    _run(go)


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


def _monitor(socket_path: Path, once: bool) -> None:
    """`monitor`, and again each time babblerd ends it (babeld restarted with a new router
    id, after its entries' `flush` lines; babblerd restarting), unless `once`. The first
    connection failing is an error, as for every command."""
    backoff = Backoff()
    served = False  # once a stream was served, failures to connect are waited out
    while True:
        try:
            _stream(socket_path, "monitor")
        except RETRIED as error:
            ended = isinstance(error, Disconnected)  # it served, then ended the stream
            if once or not (served or ended):
                raise
            served = True
            if ended:
                backoff.reset()
        time.sleep(backoff.delay())


@main.command()
@socket_option
@click.option("--once", is_flag=True, help="end when babblerd ends the stream (exit 1)")
@click.pass_context
def monitor(ctx: click.Context, socket_path: Path | None, once: bool) -> None:
    """Follow babeld's table, live, in babeld's line format.

    Prints the table, then add/change/flush lines. When babeld restarts (its router id
    changes), babblerd sends the old table's flush lines and ends the stream, as babeld's
    own socket would; this command then reconnects and prints the new table (--once: exit
    1), and likewise when babblerd restarts. Keeps an on-demand mesh up while it runs.
    """
    _run(lambda: _monitor(socket_of(ctx, socket_path), once))


@main.command()
@socket_option
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="babblerd's JSON events, a line each (the default when stdout is not a terminal)",
)
@click.option("--nodes", "only_nodes", is_flag=True, help="only the other nodes' ups and downs")
@click.option("--once", is_flag=True, help="end when babblerd goes, instead of waiting for it")
@click.pass_context
def watch(
    ctx: click.Context, socket_path: Path | None, as_json: bool, only_nodes: bool, once: bool
) -> None:
    """Follow the node's state, live: on a terminal one line per change that matters (a
    node up or down or reached over another link, a link up or down, a neighbour met or
    lost, babeld failing); piped, or with --json, babblerd's JSON events (a snapshot, then
    an event a line; docs/protocol.md). When babblerd restarts it waits and goes on, as the
    client library does (--once: exit 1); when it is not running at all, exit 1. Keeps an
    on-demand mesh up while it runs."""

    def go() -> None:
        client = _client(ctx, socket_path)
        client.status()  # not running at all: say so and exit 1, as every command does
        view = WatchView(only_nodes)
        human = not as_json and sys.stdout.isatty()
        for event in client.watch(reconnect=not once):
            if not human:
                if isinstance(event, NodeEvent) or not only_nodes:
                    line = as_json_line(event)
                    if line is None:
                        click.echo(f"babblerctl: {view.lines(event)[0]}", err=True)
                    else:
                        click.echo(line)
                continue
            for line in view.lines(event):
                click.echo(f"{time.strftime('%H:%M:%S')}  {line}")

    _run(go)


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
        raise click.BadParameter(f"{text!r}: from 1K to 1G", param_hint="--max-size")
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
    "--port",
    type=click.IntRange(1, 65535),
    default=DEFAULT_BENCH_PORT,
    show_default=True,
    help="responder port",
)
@click.option("-4", "v4", is_flag=True, help="over IPv4 node addresses (as MLX jobs run)")
@click.option("--json", "as_json", is_flag=True, help="print the results as JSON")
@click.option(
    "--svg",
    type=click.Path(path_type=Path, dir_okay=False),
    help="draw throughput against message size into this SVG file (implies --sweep);"
    " with --ring each link's rate, the slowest and the sum",
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
    v4: bool,
    as_json: bool,
    svg: Path | None,
) -> None:
    """Measure the links to NODE (a name, node id or any address of it) over TCP: round
    trips (p50, p99), throughput each way for --duration seconds, and one message of each
    size from 1 KiB to 1 GiB, a factor of 4 apart (size, time, Gbit/s), timed as exo's MLX
    bandwidth bench times them (test_mlx_bandwidth.py in exo's bench folder; exo is the
    project babbler came from; it says GB/s). The other node's babblerd answers (its
    responder, on by default: babblerd --bench).

    --all measures every reachable node in turn (no sweep unless asked); --ring makes every
    node send to the next at once, as an all-gather does, to find the slow link (the slowest
    and the sum of the rates follow). Every rate is in Gbit/s (10^9 bits a second). No root
    needed; docs/bench.md.
    """
    if sum((node is not None, every, ring)) != 1:
        raise click.UsageError("give one of NODE, --all or --ring")
    largest = _size(max_size)
    from babbler.bench import cli as bench_cli

    def go() -> None:
        status = _client(ctx, socket_path).status()
        if v4:
            status = bench_cli.over_ipv4(status, node)
        if ring:
            bench_cli.run_ring(status, duration=duration, port=port, as_json=as_json, svg=svg)
            return
        bench_cli.run_nodes(
            status,
            node,
            duration=duration,
            sweep=bool(sweep if sweep is not None else (node is not None or svg is not None)),
            largest=largest,
            port=port,
            as_json=as_json,
            svg=svg,
        )

    _run(go)


@main.command()
@socket_option
@click.option("--json", "as_json", is_flag=True, help="the checks as a JSON list")
@click.option(
    "--state-dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=DEFAULT_STATE_DIR,
    show_default=True,
    envvar="BABBLER_STATE_DIR",
    help="babblerd's state directory (what a crashed babblerd left is recorded there) "
    "[env BABBLER_STATE_DIR: babbler-lab exec sets it to the node's]",
)
@click.option(
    "--platform",
    "platform_key",
    type=click.Choice(sorted(PLATFORMS)),
    envvar="BABBLER_PLATFORM",
    default=None,
    help="check as this platform [default: the one babblerd acts as, else this system's;"
    " babbler-lab's macOS nodes set BABBLER_PLATFORM=macos]",
)
@click.option(
    "--probe",
    is_flag=True,
    help="also act: 1 MiB over each cable, each node address, the routes they take, "
    "routes of the host over the mesh's prefixes (docs/operations.md)",
)
@click.option(
    "--bundle",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="write a tarball for a bug report to FILE (the doctor with --probe, status, "
    "nodes, the log's last lines, versions, kernel settings; never the mesh key)",
)
@click.option(
    "--log-file",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="babblerd's log, for --bundle [default: journalctl -u babblerd, else "
    "/var/log/babblerd.log]",
)
@click.pass_context
def doctor(
    ctx: click.Context,
    socket_path: Path | None,
    as_json: bool,
    state_dir: Path,
    platform_key: str | None,
    probe: bool,
    bundle: Path | None,
    log_file: Path | None,
) -> None:
    """Check this host for what keeps a mesh from working: babblerd and babeld, each
    physical link (up, cable, link-local, used, neighbours), forwarding and router
    advertisements, the rules that fence the mesh off, IPv4, and on Linux thunderbolt-net,
    on macOS the Thunderbolt Bridge and the firewall. One line each: ok, warn or fail, what
    it saw, what to do. Exits 1 when a check fails. Needs no root (with root it also
    checks what a crashed babblerd left). --probe also acts, layer by layer, and stops at
    the first that fails; --bundle FILE writes all of it, and more, for a bug report."""
    from babbler.ctl.doctor import gather
    from babbler.ui.doctor import checks, failed, render_checks

    def go() -> None:
        asked = PLATFORMS[platform_key] if platform_key else None
        facts = gather(socket_of(ctx, socket_path), state_dir=state_dir, platform=asked)
        found = checks(facts)
        if probe or bundle:
            from babbler.ctl.probe import probe_checks

            found += probe_checks(facts)
        if bundle:
            from babbler.ctl.bundle import write_bundle

            click.echo(write_bundle(bundle, facts, found, state_dir, log_file))
            return
        if as_json:
            click.echo(json.dumps([dataclasses.asdict(c) for c in found], indent=2))
        else:
            click.echo(render_checks(found))
        if failed(found):
            sys.exit(1)

    _run(go)


@main.command()
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
def keygen(file: Path) -> None:
    """Write a new random mesh key to FILE (mode 0600; an existing file is never replaced;
    its directory is made if missing). FILE `-` prints the key instead.

    Copy the same file to every node (root-owned, 0600) and start each babblerd with
    --key-file FILE: nodes without the key are then no neighbours.
    """
    from babbler.ctl.keygen import new_key, write_new_key

    def go() -> None:
        if str(file) == "-":
            click.echo(new_key(), nl=False)
            return
        try:
            made = write_new_key(file)
        except FileExistsError:
            raise BabblerError(f"{file} exists; a key is never overwritten") from None
        except PermissionError:
            raise BabblerError(f"cannot write {file}: permission denied (run as root)") from None
        except OSError as error:
            raise BabblerError(f"cannot write {file}: {error.strerror or error}") from None
        also = f" (made {file.parent})" if made else ""
        click.echo(f"wrote a new mesh key to {file} (mode 0600){also}")

    _run(go)


for live in (live_top.command, live_web.command, live_metrics.command):
    main.add_command(live)  # the live views (babbler/live/): each imports its library when run
command.versioned(main, "babblerctl", __version__)  # every subcommand, last


if __name__ == "__main__":
    main()
