"""`babblerctl bench`: which nodes, in what order, with a progress bar on a terminal, and
the output (runner measures, report renders)."""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import click

from babbler.bench import report, runner, wire
from babbler.bench.report import NodeResult
from babbler.bench.wire import SWEEP
from babbler.client import Node, Status
from babbler.core.errors import BabblerError
from babbler.core.printable import escape
from babbler.ui.command import write_whole
from babbler.ui.render import ipv4_node_address, lines_of, reachable_node

BAR = 30
# Redraws at most this often (it was called per chunk: 65,000 redraws, 4.5 MB of terminal
# output in a 24 s `bench --all`, painful over SSH); 10 a second still looks live.
REDRAW = 0.1


class Bar:
    """A one-line progress bar on stderr, when it is a terminal (else silent), redrawn at
    most every REDRAW seconds and only when what it shows changed."""

    def __init__(self, enabled: bool, clock: Callable[[], float] = time.monotonic) -> None:
        self.enabled = enabled
        self._clock = clock
        self._shown = ""
        self._at = -math.inf
        self.redraws = 0

    def step(self, label: str) -> Callable[[float], None]:
        label = escape(label)  # it names another node

        def show(done: float) -> None:
            if not self.enabled:
                return
            filled = int(done * BAR)
            line = f"\r  {label:<28} [{'#' * filled}{'.' * (BAR - filled)}] {done * 100:3.0f}%"
            now = self._clock()
            if line == self._shown or (now - self._at < REDRAW and done < 1.0):
                return
            sys.stderr.write(line)
            sys.stderr.flush()
            self._shown, self._at = line, now
            self.redraws += 1

        self._at = -math.inf  # a new step shows at once
        show(0.0)
        return show

    def clear(self) -> None:
        if self.enabled:
            sys.stderr.write("\r" + " " * (BAR + 40) + "\r")
            sys.stderr.flush()


def measure(
    node: Node,
    port: int,
    duration: float,
    sizes: list[int],
    bar: Bar,
) -> NodeResult:
    result = NodeResult(node.label, node.node_id, node.node_address, node.hops)
    address = node.node_address
    try:
        result.rtts = runner.rtt(address, port, progress=bar.step(f"{node.label} round trips"))
        result.sent = runner.send(address, port, duration, bar.step(f"{node.label} send"))
        result.received = runner.receive(address, port, duration, bar.step(f"{node.label} receive"))
        if sizes:
            result.sweep = runner.sweep(address, port, sizes, bar.step(f"{node.label} sizes"))
    except (runner.BenchError, OSError, ValueError) as error:
        result.error = str(error)
    finally:
        bar.clear()
    return result


def over_ipv4(status: Status, node: str | None = None) -> Status:
    """The status with every node address replaced by its IPv4 one (`bench -4`): this
    node's must exist (else why not, as `ip -4` says), and the one named, if any; other
    nodes without one are left out."""
    mine = ipv4_node_address(status)
    if node is not None:
        target = reachable_node(status, node)
        if not target.node_address_v4:
            raise BabblerError(f"{target.label}'s IPv4 node address is not known (yet)")
    nodes = tuple(
        replace(n, node_address=n.node_address_v4) for n in status.nodes if n.node_address_v4
    )
    return replace(status, node_address=mine, nodes=nodes)


def run_ring(
    status: Status, *, duration: float, port: int, as_json: bool, svg: Path | None = None
) -> None:
    """`bench --ring`: every node (this one too, in name order) sends to the next at once."""
    me = status.name or status.node_id
    reachable = sorted((n for n in status.nodes if n.reachable), key=lambda n: n.label)
    if not reachable:
        raise BabblerError("no other node is reachable: nothing to make a ring with")
    members = sorted([(me, status.node_address), *((n.label, n.node_address) for n in reachable)])
    names = [name for name, _ in members]
    bar = Bar(sys.stderr.isatty() and not as_json)
    bar.step(f"ring of {len(members)} for {duration:g} s")(0.0)
    rates = runner.ring([address for _, address in members], port, duration)
    bar.clear()
    if as_json:
        click.echo(json.dumps(report.ring_json(me, names, rates), indent=2))
    else:
        click.echo(lines_of(report.ring(names, rates, duration)))  # names: escaped
    if svg is not None:
        write_whole(report.ring_svg(me, names, rates, duration), svg)
        click.echo(f"wrote {svg}", err=as_json)
    if any(not isinstance(rate, wire.Rate) for rate in rates):
        sys.exit(1)


def run_nodes(
    status: Status,
    node: str | None,
    *,
    duration: float,
    sweep: bool,
    largest: int,
    port: int,
    as_json: bool,
    svg: Path | None,
) -> None:
    """`bench NODE` (round trips, both directions, the sizes) or `bench --all` (every
    reachable node in turn, one table)."""
    me = status.name or status.node_id
    reachable = sorted((n for n in status.nodes if n.reachable), key=lambda n: n.label)
    targets = [reachable_node(status, node)] if node is not None else reachable
    if not targets:
        raise BabblerError("no other node is reachable")
    sizes = [size for size in SWEEP if size <= largest] if sweep else []
    bar = Bar(sys.stderr.isatty() and not as_json)
    results = [measure(target, port, duration, sizes, bar) for target in targets]
    if as_json:
        found: dict[str, object] = {"from": me, "nodes": [r.to_json() for r in results]}
        if node is None:
            found["behind_slow_links"] = report.behind_slow_links(results)
        click.echo(json.dumps(found, indent=2))
    elif node is not None:
        click.echo(lines_of(report.one(me, results[0])))  # names: escaped
    else:
        click.echo(lines_of(report.every(me, results)))
        for result in results:
            if result.sweep:
                click.echo("\n" + lines_of(report.one(me, result)))
    if svg is not None:
        write_whole(report.svg(me, results), svg)
        click.echo(f"wrote {svg}", err=as_json)
    if any(result.error for result in results):
        sys.exit(1)
