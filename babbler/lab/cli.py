"""`babbler-lab`: the command line over `babbler.lab.Lab` (needs root)."""

from __future__ import annotations

import functools
import os
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar, cast

import click

from babbler import __version__
from babbler.client import NotRunning, parse_status
from babbler.core.config import (
    DEFAULT_HELLO_INTERVAL,
    MAX_HELLO_INTERVAL,
    MIN_HELLO_INTERVAL,
    MODES,
)
from babbler.core.errors import BabblerError
from babbler.core.graph import Graph, to_dot
from babbler.lab import (
    PLATFORMS,
    SPEEDS,
    TOPOLOGIES,
    Lab,
    LabError,
    LabNotUp,
    Node,
    farthest,
    wait,
)
from babbler.lab.capacity import too_big
from babbler.lab.macos import node as mac
from babbler.ui.command import render_svg, run_command, versioned
from babbler.ui.render import render_path, render_status

F = TypeVar("F", bound=Callable[..., Any])
NO_BREAK = "\u2011"  # a non-breaking hyphen: stands in for "-" while click wraps the help
PICTURE_WAIT = 15.0  # the picture waits this long for every node's info, then shows what it has

# -- command line ------------------------------------------------------------------------------


def _guard(fn: Callable[[], object]) -> None:
    run_command("babbler-lab", fn)


def _need_root() -> None:
    if os.geteuid() != 0:
        click.echo("babbler-lab: must run as root (it creates network namespaces)", err=True)
        sys.exit(1)


DEFAULT_NAME = "lab"


def _said(name: str) -> str:
    """What the lab's lines begin with: `lab NAME`, or `lab` for the default lab (not
    "lab lab")."""
    return "lab" if name == DEFAULT_NAME else f"lab {name}"


def _as(name: str) -> str:
    """The `--name` a command shown for this lab needs to work pasted (none for the default
    lab, unless BABBLER_LAB names another)."""
    return f" --name {name}" if name != DEFAULT_NAME or os.environ.get("BABBLER_LAB") else ""


NAME_HELP = (
    "lab name: namespaces are bbl-NAME-n1..., files (logs too) /run/babbler-lab/NAME "
    "[env BABBLER_LAB; default: lab]"
)


def _named(command: F) -> F:
    """`--name` after the subcommand too (before it, it is the group's option); the
    command gets the lab's name first."""

    @functools.wraps(command)
    def run(*args: Any, lab_name: str | None, **kwargs: Any) -> Any:
        name = lab_name or click.get_current_context().find_root().params["name"]
        return command(name, *args, **kwargs)

    option = click.option("--name", "lab_name", default=None, metavar="NAME", help=NAME_HELP)
    return cast(F, option(run))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--name", default=DEFAULT_NAME, envvar="BABBLER_LAB", metavar="NAME", help=NAME_HELP)
@click.version_option(__version__, prog_name="babbler-lab")
@click.pass_context
def main(ctx: click.Context, name: str) -> None:
    """A babbler mesh of N nodes in network namespaces, with real babeld (needs root).

    \b
    babbler-lab up --nodes 4 --topology ring --wait 60
    babbler-lab status n1
    babbler-lab exec n1 -- babblerctl nodes
    babbler-lab exec n1 -- ping -c 3 fde0:20c6:1fa7:ffff:...
    babbler-lab down

    Several labs side by side: --name NAME (before or after the command) or BABBLER_LAB.

    \b
    Files: /run/babbler-lab/NAME, each node's babblerd log nI/babblerd.log there.
    A directory there or above it that is a symlink, not root's, or writable by
    others is refused.
    """
    ctx.obj = name


def _bring_up(
    name: str,
    nodes: int,
    topology: str,
    hello: float | None,
    mode: str,
    wait: float | None,
    key_file: Path | None = None,
    real_links: bool = False,
    carrier_delay: float = 0.0,
    platform: str = "linux",
    bridged: bool = False,
    speed: int = 40,
) -> Lab:
    daemon_args = ["--mode", mode] + (["--hello-interval", f"{hello:g}"] if hello else [])
    daemon_args += ["--key-file", str(key_file)] if key_file else []
    warning = too_big(nodes, hello or DEFAULT_HELLO_INTERVAL, os.cpu_count() or 1)
    if warning:
        click.echo(f"babbler-lab: note: {warning}", err=True)
    started = time.monotonic()
    lab = Lab.create(name, nodes, topology, daemon_args, real_links, platform, bridged, speed)
    try:
        lab.start_all()
        if real_links:  # the cables are plugged in once every babblerd runs
            time.sleep(carrier_delay)
            lab.plug_all()
        acting = "" if platform == "linux" else f", {platform} nodes"
        served = time.monotonic() - started
        click.echo(
            f"{_said(name)}: {nodes} nodes, {topology}{acting}, babblerd serving on all "
            f"({served:.2f} s since babbler-lab started)"
        )
        if bridged and platform != "linux":
            click.echo(
                f"{_said(name)}: the macOS nodes' Thunderbolt ports are in bridge0, as on a new"
                " Mac: `babbler-lab exec NODE -- babblerctl doctor` says how to take them out"
            )
        click.echo(f"{_said(name)}: logs in {lab.base}/n*/babblerd.log")
        if wait:
            lab.wait_reachable(wait)
            reached = time.monotonic() - started
            click.echo(
                f"{_said(name)}: every node reaches every other ({reached:.2f} s since "
                f"babbler-lab started, {reached - served:.2f} s after every babblerd served)"
            )
        elif mode == "on-demand":
            click.echo(
                f"{_said(name)}: on demand: each node's mesh idles until something on that"
                f" node subscribes (`babbler-lab{_as(name)} exec NODE -- babblerctl watch`)"
            )
        else:
            click.echo(
                f"{_said(name)}: the mesh may still be forming (`babbler-lab{_as(name)} status`;"
                " --wait SECONDS waits until every node reaches every other)"
            )
    except BaseException:
        lab.down()
        raise
    return lab


up_options = [
    click.option(
        "--nodes",
        default=4,
        show_default=True,
        type=click.IntRange(1, 64),
        help="how many nodes (network namespaces)",
    ),
    click.option(
        "--topology",
        default="ring",
        show_default=True,
        type=click.Choice(TOPOLOGIES),
        help="how the nodes are wired: line n1-n2-...; ring closes the line; star wires all"
        " to n1; grid a square-ish grid, row by row",
    ),
    click.option(
        "--hello-interval",
        type=click.FloatRange(MIN_HELLO_INTERVAL, MAX_HELLO_INTERVAL),
        default=None,
        help="babblerd --hello-interval in seconds [default: babblerd's]",
    ),
    click.option(
        "--mode",
        default="always",
        show_default=True,
        type=click.Choice(MODES),
        help="babblerd --mode on every node",
    ),
    click.option(
        "--platform",
        default="linux",
        show_default=True,
        type=click.Choice(PLATFORMS),
        help="what the nodes act as: macos runs babblerd's macOS code path over commands that"
        " act and print as a Mac's (ifconfig, netstat, networksetup...); mixed: odd nodes"
        " Linux, even nodes macOS (docs/macos.md)",
    ),
    click.option(
        "--thunderbolt",
        "speed",
        default="4",
        show_default=True,
        type=click.Choice(["4", "5"]),
        help="macOS nodes: the Thunderbolt their cables are (4: 40 Gb/s, 5: 80 Gb/s), as"
        " system_profiler describes them",
    ),
]


def _with(options: list[Callable[[F], F]]) -> Callable[[F], F]:
    """Apply a shared list of click options (for commands that take the same ones)."""

    def apply(fn: F) -> F:
        for option in reversed(options):
            fn = option(fn)
        return fn

    return apply


@main.command()
@_named
@_with(up_options)
@click.option(
    "--wait",
    type=float,
    default=None,
    metavar="SECONDS",
    help="wait until every node pings every other, at most this long",
)
@click.option(
    "--key-file",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="every node's babblerd --key-file (made with babblerctl keygen: try a mesh key)",
)
@click.option(
    "--real-links",
    is_flag=True,
    help="links as cables: the kernel's duplicate address detection, created down and "
    "plugged in once every babblerd runs [default: up from the start, without DAD]",
)
@click.option(
    "--unbridged",
    is_flag=True,
    help="macOS nodes: their Thunderbolt ports out of bridge0 from the start [default: in"
    " it, as on a new Mac]",
)
@click.option(
    "--carrier-delay",
    type=click.FloatRange(0, 60),
    default=0.0,
    metavar="SECONDS",
    help="with --real-links: wait this long after the daemons start before plugging in",
)
def up(
    name: str,
    nodes: int,
    topology: str,
    hello_interval: float | None,
    mode: str,
    wait: float | None,
    key_file: Path | None,
    real_links: bool,
    carrier_delay: float,
    platform: str,
    speed: str,
    unbridged: bool,
) -> None:
    """Create the namespaces and links and start babblerd on every node."""
    if mode == "on-demand" and wait:
        raise click.UsageError(
            "--wait needs the mesh up, and an on-demand node runs it only while something "
            "on it subscribes: use --mode always, or run `babblerctl watch` on every node"
        )
    _need_root()
    _guard(
        lambda: _bring_up(
            name,
            nodes,
            topology,
            hello_interval,
            mode,
            wait,
            key_file,
            real_links,
            carrier_delay,
            platform,
            bridged=platform != "linux" and not unbridged,
            speed=SPEEDS[int(speed) - 4],
        )
    )


@main.command("status")
@_named
@click.argument("node", required=False)
def lab_status(name: str, node: str | None) -> None:
    """babblerctl status of NODE (n1, n2...), or one line per node. Exits 1 when a node's
    babblerd is not running, and says which."""

    def go() -> None:
        lab = Lab.load(name)
        if node:
            target = lab.node(node)
            try:
                click.echo(render_status(parse_status(lab.status(target))))
            except NotRunning:
                raise _not_running(name, lab, [target.name]) from None
            return
        others = len(lab.nodes) - 1
        stopped = []
        for n in lab.nodes:
            try:
                s = lab.status(n)
                reached = sum(1 for o in s["nodes"] if o["reachable"])
                restarts = s["babeld"]["restarts"]
                trouble = f"  babeld restarted {restarts} times" if restarts else ""
                click.echo(
                    f"{n.name}  {s['node_id']}  mesh {s['mesh']:<8}  "
                    f"neighbours {len(s['neighbours'])}  reaches {reached} of {others} nodes"
                    f"{trouble}"
                )
            except NotRunning:
                click.echo(f"{n.name}  not running")
                stopped.append(n.name)
        if stopped:
            raise _not_running(name, lab, stopped)

    _guard(go)


def _not_running(name: str, lab: Lab, stopped: list[str]) -> LabError:
    """The nodes whose babblerd does not answer, with the first's log and how to start it."""
    first = stopped[0]
    return LabError(
        f"babblerd not running on {', '.join(stopped)} (its log: {lab.base}/{first}/"
        f"babblerd.log; start it: babbler-lab{_as(name)} start {first})"
    )


@main.command("exec", context_settings={"ignore_unknown_options": True})
@_named
@click.argument("node")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def lab_exec(name: str, node: str, command: tuple[str, ...]) -> None:
    """Run COMMAND inside NODE's namespace: babbler-lab exec n1 -- ping fde0:...

    babblerctl there talks to NODE's babblerd (BABBLER_SOCKET), and its doctor reads NODE's
    state dir (BABBLER_STATE_DIR) and says how to start it (BABBLER_START_HINT); the lab's
    own programs (babblerctl, babblerd) come first on PATH, also under sudo, which resets
    PATH."""
    _need_root()

    def go() -> None:
        target = Lab.load(name).node(node)
        os.environ["BABBLER_SOCKET"] = str(target.socket)  # babblerctl talks to this node
        os.environ["BABBLER_STATE_DIR"] = str(target.state_dir)  # its doctor finds a crash's
        os.environ["BABBLER_START_HINT"] = f"start it: babbler-lab{_as(name)} start {node}"
        if target.macos:  # its commands (ifconfig...) first, and babblerctl checks as macOS
            os.environ.update(mac.environment(target))
        here = str(Path(sys.executable).parent)  # the venv's bin: babblerctl, babblerd
        os.environ["PATH"] = os.pathsep.join([here, os.environ.get("PATH", "/usr/bin:/bin")])
        os.execvp("ip", ["ip", "netns", "exec", target.netns, *command])

    _guard(go)


@main.command("stop")
@_named
@click.argument("node")
def stop_node(name: str, node: str) -> None:
    """Stop NODE's babblerd cleanly (SIGTERM), as `systemctl stop` would, and a bench
    responder that a babblerd killed before left running."""
    _need_root()

    def go() -> None:
        lab = Lab.load(name)
        target = lab.node(node)
        if target.pid is None:
            click.echo(f"{_said(name)}: {target.name}'s babblerd is not running")
            return
        lab.stop(target)
        click.echo(f"{_said(name)}: {target.name}'s babblerd stopped")

    _guard(go)


@main.command("start")
@_named
@click.argument("node")
def start_node(name: str, node: str) -> None:
    """Start NODE's babblerd (stopped with `stop`), with the flags the lab gave it."""
    _need_root()

    def go() -> None:
        lab = Lab.load(name)
        target = lab.node(node)
        if target.pid is not None and lab.running(target):
            click.echo(f"{_said(name)}: {target.name}'s babblerd is already running")
            return
        lab.start(target)
        click.echo(f"{_said(name)}: {target.name}'s babblerd serving")

    _guard(go)


@main.command("restart")
@_named
@click.argument("node")
def restart_node(name: str, node: str) -> None:
    """Stop NODE's babblerd cleanly and start it again."""
    _need_root()

    def go() -> None:
        lab = Lab.load(name)
        target = lab.node(node)
        lab.stop(target)
        lab.start(target)
        click.echo(f"{_said(name)}: {target.name}'s babblerd restarted")

    _guard(go)


@main.command("mac")
@_named
@click.argument("node")
@click.option("--macos", metavar="VERSION", help="what its sw_vers says (26.2 by default)")
@click.option(
    "--rdma",
    type=click.Choice(mac.RDMA_STATES),
    help="its RDMA over Thunderbolt: enabled (the default), disabled, or no-devices "
    "(enabled, and ibv_devices lists none)",
)
def mac_settings(name: str, node: str, macos: str | None, rdma: str | None) -> None:
    """A macOS NODE's version and RDMA state, as its commands say them; babblerd reads
    them when it starts or a link changes (after an update or `rdma_ctl enable` a Mac
    restarts too: `babbler-lab restart NODE`)."""
    _need_root()

    def go() -> None:
        target = Lab.load(name).node(node)
        if not target.macos:
            raise LabError(f"{target.name} is not a macOS node (babbler-lab up --platform)")
        now = mac.set_mac(target, macos, rdma)
        click.echo(f"{_said(name)}: {target.name} macOS {now['macos']}, RDMA {now['rdma']}")

    _guard(go)


def _cable_command(name: str, a: str, b: str, plugged: bool) -> None:
    _need_root()

    def go() -> None:
        lab = Lab.load(name)
        ends = lab.cable(lab.node(a).index, lab.node(b).index)
        lab.plug(*ends, up=plugged)
        said = "plugged in" if plugged else "pulled out"
        click.echo(f"{_said(name)}: the cable n{ends[0]}-n{ends[1]} {said}")

    _guard(go)


@main.command()
@_named
@click.argument("a")
@click.argument("b")
def unplug(name: str, a: str, b: str) -> None:
    """Pull out the cable between nodes A and B (both ends go down, as a cable pulled)."""
    _cable_command(name, a, b, plugged=False)


@main.command()
@_named
@click.argument("a")
@click.argument("b")
def plug(name: str, a: str, b: str) -> None:
    """Plug the cable between nodes A and B back in."""
    _cable_command(name, a, b, plugged=True)


@main.command()
@_named
def down(name: str) -> None:
    """Stop the lab's daemons, and anything else running in its namespaces (a babblerd
    started by hand through `exec`), and delete its namespaces and files."""
    _need_root()

    def go() -> None:
        try:
            lab = Lab.load(name)
        except LabNotUp:  # nothing to take down: the state it was asked for
            click.echo(f"{_said(name)}: not up (nothing to take down)")
            return
        lab.down()
        click.echo(f"{_said(name)}: down")

    _guard(go)


@main.command()
@_named
@_with(up_options)
def demo(
    name: str,
    nodes: int,
    topology: str,
    hello_interval: float | None,
    mode: str,
    platform: str,
    speed: str,
) -> None:
    """Up a mesh, show node 1's status, ping the farthest node's node address and show the
    path there, draw the mesh as node 1 sees it into mesh.svg in the current directory
    (replaced if there; Graphviz's dot draws it), tear it all down. Each command shown runs
    as it is on a lab of this name while it is up."""
    _need_root()

    def go() -> None:
        lab = _bring_up(
            name,
            nodes,
            topology,
            hello_interval,
            mode,
            wait=60,
            platform=platform,
            speed=SPEEDS[int(speed) - 4],
        )
        try:
            first = lab.nodes[0]
            started = time.monotonic()
            if lab.wait_settled(first):
                click.echo(
                    f"{_said(name)}: {first.name}'s routes settled on the shortest paths "
                    f"({time.monotonic() - started:.2f} s after every node reached every other)"
                )
            on_first = f"babbler-lab{_as(name)} exec {first.name} --"  # its socket, its netns
            far = lab.nodes[farthest(lab) - 1]
            status = _with_infos(lab, first, far.name)
            click.echo(f"\n$ {on_first} babblerctl status")
            click.echo(render_status(parse_status(status)))
            address = lab.status(far)["node_address"]
            ping = ("ping", "-6", "-c", "3", "-i", "0.2", address)
            click.echo(
                f"\n$ {on_first} {' '.join(ping)}   "
                f"# {far.name}'s node address (babblerctl ip {far.name}), the farthest node"
            )
            result = lab.exec(first, *ping)
            click.echo(result.stdout.rstrip() or result.stderr.rstrip())
            if result.returncode != 0:
                raise LabError(f"ping from {first.name} to {far.name} failed")
            click.echo(f"\n$ {on_first} babblerctl path {far.name}")
            click.echo(render_path(parse_status(status), far.name))
            _draw(status, on_first)
        finally:
            lab.down()
            click.echo(f"\n{_said(name)}: down")

    _guard(go)


def _with_infos(lab: Lab, node: Node, far: str) -> dict[str, Any]:
    """The node's status once every other node is listed, its info in and naming all its
    neighbours, and the path to `far` known from them (or after 15 s): what the status, the
    path and the picture show."""

    def complete(status: dict[str, Any]) -> bool:
        listed = len(status["nodes"]) == len(lab.nodes) - 1 and not any(
            n["name"] is None or any(m["node_id"] is None for m in n["neighbours"])
            for n in status["nodes"]
        )
        try:  # a node's info may still lack a neighbour that came after it was asked
            return listed and bool(render_path(parse_status(status), far))
        except BabblerError:
            return False

    statuses: list[dict[str, Any]] = []

    def seen() -> bool:
        statuses.append(lab.status(node))
        return complete(statuses[-1])

    wait.until(seen, PICTURE_WAIT, every=0.2)
    return statuses[-1]


def _draw(status: dict[str, Any], on_first: str) -> None:
    """The mesh as node 1 sees it, into mesh.svg in the current directory."""
    out = Path("mesh.svg").resolve()
    click.echo(f"\n$ {on_first} babblerctl graph --svg {out}")
    try:
        render_svg(to_dot(Graph.from_status(status)), out)
    except BabblerError as error:
        click.echo(f"(no picture: {error})")
        return
    click.echo(f"wrote {out}")


class _WholeWords(click.HelpFormatter):
    """click's help with no word broken at a hyphen: click's wrapper breaks there, so on a
    narrow terminal /run/babbler-lab/NAME, bbl-NAME-n1 or --key-file came out in two."""

    def write_text(self, text: str) -> None:
        super().write_text(text.replace("-", NO_BREAK))

    def write_dl(
        self, rows: Iterable[tuple[str, str]], col_max: int = 30, col_spacing: int = 2
    ) -> None:
        rows = [(term, text.replace("-", NO_BREAK)) for term, text in rows]
        super().write_dl(rows, col_max, col_spacing)

    def getvalue(self) -> str:
        return super().getvalue().replace(NO_BREAK, "-")


class _WholeWordsContext(click.Context):
    formatter_class = _WholeWords


for _command in [main, *main.commands.values()]:
    _command.context_class = _WholeWordsContext
versioned(main, "babbler-lab", __version__)  # every subcommand, last


if __name__ == "__main__":
    main()
