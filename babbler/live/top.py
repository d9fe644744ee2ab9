"""`babblerctl top`: the mesh live in a terminal, redrawn every second: its nodes, every cable
with its rate each way (busiest first), what changed in the last HOLD seconds.

The frame is pure (`frame`: a MeshView to lines of styled text, fitted to a width and a
height); the loop polls `status` and `counters` over the public socket each second and
draws with rich, imported only when the command runs. A peer's text reaches the frame
escaped (core/printable.py) and becomes rich Text, never markup.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import sys
import termios
import time
import tty
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from babbler.client.errors import Disconnected, NotRunning, ProtocolError, Refused
from babbler.client.sync import ask
from babbler.core.printable import escape
from babbler.ctl.options import socket_of, socket_option
from babbler.live.mesh import HOLD, CableRow, Live, MeshView, NodeRow
from babbler.ui.command import run_command

if TYPE_CHECKING:
    from rich.text import Text

TICK = 1.0  # seconds between polls (babblerd fetches other nodes' counters at most this often)
ASK_TIMEOUT = 2.0  # seconds for one answer: a hung babblerd shows as "not answering" soon
ONCE_WAIT = 4.0  # --once: seconds to wait for every cable's rate (two readings of each node)
CHANGES_SHOWN = 4  # at most this many lines of changes in a frame
RETRIED = (NotRunning, Disconnected, Refused, TimeoutError)  # babblerd gone, restarting, full
# How a babblerd older than `counters` refuses it (daemon/requests.py's parse_request, as
# client/answer.py raises it): the one answer that turns rates off for good.
NO_COUNTERS = "babblerd said: bad unknown request 'counters'"

Segment = tuple[str, str]  # text (already safe to show) and a rich style ("" for none)
Line = list[Segment]

CHANGE_STYLE = {
    "joined": "green",
    "cable-up": "green",
    "left": "red",
    "cable-down": "red",
}
FRESH = "bold yellow"  # a row a change of the last HOLD seconds is about


def cells(text: str) -> int:
    """Terminal columns `text` takes: wide (CJK) characters two, combining ones none."""
    return sum(_cell(c) for c in text)


def _cell(char: str) -> int:
    if unicodedata.combining(char):
        return 0
    return 2 if unicodedata.east_asian_width(char) in "WF" else 1


def fit(text: str, width: int) -> str:
    """`text` cut to `width` columns (an ellipsis says it was cut), padded to `width`."""
    if cells(text) > width:
        out, used = "", 0
        for char in text:
            if used + _cell(char) > width - 1:
                break
            out, used = out + char, used + _cell(char)
        text = out + "…"
    return text + " " * (width - cells(text))


def rate_text(bytes_per_s: float | None) -> str:
    """A rate in bits per second as people read them: `-` (no rate yet), `0 b/s`, `812 kb/s`,
    `9.41 Gb/s`."""
    if bytes_per_s is None:
        return "-"
    bits = bytes_per_s * 8
    for unit, scale in (("", 1.0), ("k", 1e3), ("M", 1e6), ("G", 1e9)):
        shown = f"{bits / scale:.3g}"
        if float(shown) < 1000:
            return f"{shown} {unit}b/s"
    return f"{bits / 1e12:.3g} Tb/s"


def speed_text(mbps: int | None) -> str:
    if mbps is None:
        return "-"
    return f"{mbps / 1000:g}G" if mbps >= 1000 else f"{mbps}M"


def _name(name: str | None, node_id: str) -> str:
    return escape(name) if name else node_id


def frame(
    mesh: MeshView,
    *,
    width: int,
    height: int | None,
    now: float,
    note: str | None = None,
    hint: str = "",
) -> list[Line]:
    """The frame for a terminal of `width` columns and `height` lines (None: as many as it
    takes): a title (`hint` at its right where it fits), `note` (a problem) under it, the
    nodes, the cables busiest first, the recent changes, each list cut to what fits with a
    line saying how many more."""
    fresh = {c.subject for c in mesh.changes}
    me = next((n for n in mesh.nodes if n.state == "me"), None)
    up = sum(1 for n in mesh.nodes if n.state != "down")
    title = f"babbler top: {_name(me.name, me.node_id) if me else '?'}"
    title += f"  {up} of {len(mesh.nodes)} nodes up, {len(mesh.cables)} cables"
    if hint and cells(title) + 2 + cells(hint) <= width:
        lines: list[Line] = [[(fit(title, width - cells(hint)), "bold"), (hint, "dim")]]
    else:
        lines = [[(fit(title, width), "bold")]]
    if note:
        lines.append([(fit(escape(note), width), "bold red")])
    changes = [_change_line(c, now, width) for c in mesh.changes]
    shown_changes = changes[:CHANGES_SHOWN]
    if len(changes) > CHANGES_SHOWN:
        shown_changes[-1] = [(fit(f"… {len(changes) - CHANGES_SHOWN + 1} more changes", width), "")]
    heads = 2 + (1 if changes else 0)  # the nodes' and the cables' column heads
    nodes, cables = len(mesh.nodes), max(1, len(mesh.cables))
    if height is None:
        node_rows, cable_rows = nodes, cables
    else:
        room = max(2, height - len(lines) - heads - len(shown_changes))
        node_rows = min(nodes, max(room // 2, room - cables))
        cable_rows = max(1, room - node_rows)
    lines += _node_table(mesh.nodes, fresh, width, node_rows)
    lines += _cable_table(mesh.cables, fresh, width, cable_rows)
    if changes:
        lines.append([(fit(f"CHANGES (last {HOLD:g} s)", width), "bold")])
        lines += shown_changes
    return lines if height is None else lines[:height]


def _change_line(change: Any, now: float, width: int) -> Line:
    ago = f"{max(0.0, now - change.at):3.0f}s ago  "
    return [(fit(ago + escape(change.text), width), CHANGE_STYLE.get(change.kind, "yellow"))]


def _table(
    heads: Sequence[str],
    rows: list[tuple[list[str], str]],
    widths: list[int],
    width: int,
    limit: int,
    what: str,
) -> list[Line]:
    """Column heads, then rows (cells, style) cut to `limit` lines, the last one saying how
    many more rows there are when they do not all fit. Numbers are right-aligned."""

    def line(values: Sequence[str]) -> str:
        cut = (fit(v, w) for v, w in zip(values, widths, strict=True))
        aligned = (
            c.strip().rjust(len(c)) if h in NUMBERS else c for c, h in zip(cut, heads, strict=True)
        )
        return fit(" ".join(aligned).rstrip(), width)

    out: list[Line] = [[(line(heads), "bold")]]
    kept = len(rows) if len(rows) <= limit else max(0, limit - 1)
    out += [[(line(cells_), style)] for cells_, style in rows[:kept]]
    if kept < len(rows):
        out.append([(fit(f"… {len(rows) - kept} more {what}", width), "dim")])
    return out


def _widths(
    heads: Sequence[str], rows: list[list[str]], width: int, shrink: list[int]
) -> list[int]:
    """Each column as wide as its widest cell; over `width`, the `shrink` columns give way
    in turn, down to 6 columns each."""
    widths = [max([cells(h)] + [cells(r[i]) for r in rows]) for i, h in enumerate(heads)]
    for i in shrink:
        excess = sum(widths) + len(widths) - 1 - width
        if excess > 0:
            widths[i] = max(6, widths[i] - excess)
    return widths


NODE_HEADS = ("NODE", "ADDRESS", "IPV4", "HOPS", "STATE")
NUMBERS = frozenset({"HOPS", "SPEED", "MTU", "A->B", "B->A"})  # right-aligned columns


def _node_table(nodes: list[NodeRow], fresh: set[str], width: int, limit: int) -> list[Line]:
    rows = [
        [
            _name(n.name, n.node_id),
            escape(n.address or "-"),
            escape(n.address_v4 or "-"),
            "-" if n.hops is None else str(n.hops),
            n.state,
        ]
        for n in nodes
    ]
    styles = [FRESH if n.node_id in fresh else ("dim" if n.state == "down" else "") for n in nodes]
    widths = _widths(NODE_HEADS, rows, width, shrink=[0, 2, 1])
    return _table(NODE_HEADS, list(zip(rows, styles, strict=True)), widths, width, limit, "nodes")


CABLE_HEADS = ("END A", "END B", "SPEED", "MTU", "A->B", "B->A")


def _cable_table(cables: list[CableRow], fresh: set[str], width: int, limit: int) -> list[Line]:
    rows = [
        [
            f"{_name(c.a.name, c.a.node_id)} {escape(c.a.interface)}",
            f"{_name(c.b.name, c.b.node_id)} {escape(c.b.interface)}",
            speed_text(c.speed_mbps),
            "-" if c.mtu is None else str(c.mtu),
            rate_text(c.a_to_b),
            rate_text(c.b_to_a),
        ]
        for c in cables
    ]
    styles = [FRESH if c.key in fresh else "" for c in cables]
    widths = _widths(CABLE_HEADS, rows, width, shrink=[0, 1])
    if not rows:
        return [[(fit("no cables (yet)", width), "dim")]]
    return _table(CABLE_HEADS, list(zip(rows, styles, strict=True)), widths, width, limit, "cables")


def plain(lines: list[Line]) -> str:
    """The frame as plain text, one line each, trailing blanks left out."""
    return "\n".join("".join(text for text, _ in line).rstrip() for line in lines)


def styled(lines: list[Line]) -> Text:
    """The frame as rich Text: a peer's name is appended as text, never read as markup."""
    from rich.text import Text

    out = Text(no_wrap=True, overflow="crop")
    for i, line in enumerate(lines):
        if i:
            out.append("\n")
        for text, style in line:
            out.append(text, style=style or None)
    return out


class Poller:
    """One poll a call: `status` and `counters` asked, the model stepped. Where babblerd is
    not answering, the last view stays and `problem` says why."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.model = Live()
        self.mesh: MeshView | None = None
        self.problem: str | None = None
        self.rates = True  # babblerd answers `counters` (an older one does not)

    def poll(self, now: float) -> None:
        status = ask(self.path, "status", ASK_TIMEOUT)
        if not isinstance(status, dict) or not isinstance(status.get("node_id"), str):
            raise ProtocolError(f"`status` answered no node's status ({self.path})")
        counters, problem = None, None
        if self.rates:
            try:
                counters = ask(self.path, "counters", ASK_TIMEOUT)
            except ProtocolError as error:
                if str(error).startswith(NO_COUNTERS):
                    self.rates = False
                else:  # a line too long, not UTF-8, not JSON: this answer's, not for good
                    problem = f"{error}; trying again every {TICK:g} s"
        self.mesh = self.model.step(status, counters if isinstance(counters, dict) else None, now)
        self.problem = problem if self.rates else "this babblerd gives no counters: no rates"

    def poll_or_wait(self, now: float) -> None:
        """Poll; when babblerd is gone, say so and keep the last view (the next poll tries
        again)."""
        try:
            self.poll(now)
        except RETRIED as error:
            self.problem = f"{error}; trying again every {TICK:g} s"


def once(path: Path, clock: Callable[[], float] = time.monotonic) -> Poller:
    """Polled until every cable has its rates, or for ONCE_WAIT seconds."""
    poller = Poller(path)
    start = clock()
    poller.poll(start)
    assert poller.mesh is not None
    while poller.rates and clock() - start < ONCE_WAIT and _rates_missing(poller.mesh):
        time.sleep(TICK)
        poller.poll(clock())
    return poller


def _rates_missing(mesh: MeshView) -> bool:
    return any(c.a_to_b is None or c.b_to_a is None for c in mesh.cables)


@contextmanager
def keys() -> Iterator[Callable[[float], bool]]:
    """Keys read one at a time (cbreak: no echo, no line editing, Ctrl-C still SIGINT),
    the terminal's settings given back on every way out. Yields `wait(seconds)`: True when
    `q` was pressed meanwhile; False at the end, or at once when the terminal was resized
    (SIGWINCH), so that the frame is drawn again at its new size."""
    fd = sys.stdin.fileno() if sys.stdin.isatty() else None
    saved = termios.tcgetattr(fd) if fd is not None else None
    woken, waker = os.pipe()  # a signal writes a byte here (set_wakeup_fd): select wakes
    for end in (woken, waker):
        os.set_blocking(end, False)
    wakeup = signal.set_wakeup_fd(waker)
    resized = signal.signal(signal.SIGWINCH, lambda _signum, _frame: None)

    def wait(seconds: float) -> bool:
        watched = [woken] if fd is None else [woken, fd]
        ready, _, _ = select.select(watched, [], [], max(0.0, seconds))
        if woken in ready:
            with suppress(BlockingIOError):
                os.read(woken, 512)
        return fd in ready and any(c in b"qQ\x03" for c in os.read(fd, 64))

    try:
        if fd is not None:
            tty.setcbreak(fd)
        yield wait
    finally:
        if fd is not None and saved is not None:
            termios.tcsetattr(fd, termios.TCSADRAIN, saved)
        signal.signal(signal.SIGWINCH, resized)
        signal.set_wakeup_fd(wakeup)
        os.close(woken)
        os.close(waker)


@contextmanager
def stopped_by_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP (a closed ssh) end the view as Ctrl-C does, so every `finally`
    on the way out runs and the terminal is given back."""

    def stop(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    saved = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for number, handler in saved.items():
            signal.signal(number, handler)


def run_live(path: Path) -> None:
    """Redraw every TICK until `q`, Ctrl-C, SIGTERM or SIGHUP."""
    from rich.console import Console
    from rich.live import Live as RichLive

    console = Console()
    poller = Poller(path)
    poller.poll(time.monotonic())  # babblerd not there at the start: one line, exit 1
    with (
        stopped_by_signals(),
        keys() as wait,
        RichLive(console=console, screen=True, auto_refresh=False) as display,
    ):
        next_poll = time.monotonic()
        while True:
            now = time.monotonic()
            if now >= next_poll:
                poller.poll_or_wait(now)
                next_poll = max(next_poll + TICK, now)
            assert poller.mesh is not None
            size = console.size
            lines = frame(
                poller.mesh,
                width=size.width,
                height=size.height,
                now=now,
                note=poller.problem,
                hint="q quits",
            )
            display.update(styled(lines), refresh=True)
            if wait(next_poll - time.monotonic()):
                return


@click.command("top")
@socket_option
@click.option(
    "--once",
    "once_only",
    is_flag=True,
    help=f"Print one frame and exit (waits up to {ONCE_WAIT:g} s for the rates: they need "
    "two readings); plain text without escape codes when not on a terminal.",
)
@click.pass_context
def command(ctx: click.Context, socket_path: Path | None, once_only: bool) -> None:
    """The mesh live, redrawn every second: its nodes and every cable with its rate each way
    now, busiest first; what changed in the last 10 s in colour.

    \b
    NODE ADDRESS IPV4   the node's name, IPv6 and IPv4 node addresses
    HOPS STATE          cables away on babeld's route; me, up or down
    END A, END B        the cable's ends: node and link (A on the lower node id)
    SPEED MTU           the slower end's link speed (G: Gbit/s), the smaller MTU
    A->B B->A           bits per second each way now (A's sent, else B's received);
                        - until two readings of a node's counters came

    Keys: q or Ctrl-C quits; the terminal is given back however it ends (SIGTERM, a closed
    ssh). If babblerd goes away meanwhile the last frame stays, a line says so and top keeps
    trying every second; if it is not running when top starts, one line says so and top
    exits 1. Off a terminal (a pipe, a file) it prints one frame as with --once.
    """
    path = socket_of(ctx, socket_path)

    def go() -> None:
        if once_only or not sys.stdout.isatty():
            _print_once(path)
        else:
            run_live(path)

    run_command("babblerctl top", go)


def _print_once(path: Path) -> None:
    poller = once(path)
    assert poller.mesh is not None
    now, note = time.monotonic(), poller.problem
    if sys.stdout.isatty():
        from rich.console import Console

        console = Console()
        lines = frame(poller.mesh, width=console.size.width, height=None, now=now, note=note)
        console.print(styled(lines))
    else:
        width = shutil.get_terminal_size((80, 24)).columns
        click.echo(plain(frame(poller.mesh, width=width, height=None, now=now, note=note)))
