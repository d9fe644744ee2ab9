"""`babblerctl metrics`: this node in Prometheus's text format, read from babblerd's public
socket (`status` and `stats` on one connection), for node_exporter's textfile collector
(`-o FILE`, written atomically) and for `babblerctl web`'s `/metrics` (`exposition`).

What is shown is babbler/live/metricset.py's (pure); the text is prometheus_client's own
exposition from a registry of this module's, imported only when metrics are made, so that
babblerctl's other commands never load it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from babbler.client.connection import Connection
from babbler.client.sync import one_json
from babbler.core.errors import BabblerError
from babbler.ctl.options import socket_of, socket_option
from babbler.live.metricset import Family, families
from babbler.ui.command import run_command, write_whole

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

# The text format generate_latest writes (names in the classic character set), for an HTTP
# answer's Content-Type: the version the text is, where prometheus_client's
# CONTENT_TYPE_LATEST names 1.0.0 (its UTF-8 names, which this text does not use).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
READ_TIMEOUT = 5.0  # seconds for babblerd's answers: under Prometheus's default scrape timeout


@dataclass(frozen=True)
class Reading:
    """What babblerd answered: `status` and `stats` objects (None where it did not), and
    why it did not answer `status` (None when it did)."""

    status: Any
    stats: Any
    problem: str | None


def read(socket_path: Path, timeout: float = READ_TIMEOUT) -> Reading:
    """`status` and `stats` from babblerd on one connection. Never raises for babblerd
    being away or answering nonsense: that is the Reading's `problem`."""
    status: Any = None
    stats: Any = None
    problem: str | None = None
    try:
        with Connection(socket_path, timeout) as conn:
            status = one_json(conn.request("status"), "status")
            stats = one_json(conn.request("stats"), "stats")
    except TimeoutError:
        problem = f"babblerd did not answer within {timeout:g} s ({socket_path})"
    except (BabblerError, OSError) as error:
        problem = str(error) or f"cannot read {socket_path}: {type(error).__name__}"
    if not isinstance(status, dict):
        return Reading(None, None, problem or f"`status` answered no JSON object ({socket_path})")
    return Reading(status, stats, None)  # a status without stats: shown without babblerd's own


def render(shown: Sequence[Family]) -> bytes:
    """The families in Prometheus's text format (0.0.4), by prometheus_client."""
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(shown))
    return generate_latest(registry)


def exposition(socket_path: Path, timeout: float = READ_TIMEOUT) -> bytes:
    """This node's metrics as `babblerctl metrics` prints them, for `/metrics` (served as
    CONTENT_TYPE): blocking (run it in a thread from async code), at most about 2 x
    `timeout` seconds; `babbler_up 0` alone when babblerd does not answer. Never raises for
    babblerd's answers."""
    reading = read(socket_path, timeout)
    return render(families(reading.status, reading.stats))


class _Collector:
    """A custom collector: the families, as prometheus_client's metric families."""

    def __init__(self, shown: Sequence[Family]) -> None:
        self._shown = shown

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        for family in self._shown:
            spec = family.spec
            kind = CounterMetricFamily if spec.kind == "counter" else GaugeMetricFamily
            metric = kind(spec.name, spec.help, labels=spec.labels)
            for labels, value in family.samples:
                metric.add_metric(labels, value)
            yield metric


@click.command("metrics")
@socket_option
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="write to FILE instead of stdout, replacing it atomically (mode 0644): for"
    " node_exporter's textfile collector, e.g."
    " /var/lib/node_exporter/textfile_collector/babbler.prom",
)
@click.pass_context
def command(ctx: click.Context, socket_path: Path | None, output: Path | None) -> None:
    """Show this node's metrics in Prometheus's text format.

    Per link: bytes and packets each way, speed, MTU; neighbours with their reach, cost and
    RTT; routes installed; nodes known and reachable; babeld's restarts; the mesh's and
    IPv4's state; problems status reports; babblerd's memory, files and tasks.
    docs/operations.md lists every name. `babblerctl web` serves the same at /metrics.

    When babblerd does not answer, the output is `babbler_up 0` alone (written with -o too,
    so an alert sees it) and the exit status 1.
    """

    def go() -> None:
        reading = read(socket_of(ctx, socket_path))
        text = render(families(reading.status, reading.stats))
        if output is None:
            sys.stdout.buffer.write(text)
            sys.stdout.buffer.flush()
        else:
            write_whole(text, output)
        if reading.problem is not None:
            raise BabblerError(f"{reading.problem} (babbler_up 0 shown)")

    run_command("babblerctl", go)
