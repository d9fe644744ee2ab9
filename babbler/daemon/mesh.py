"""The mesh supervisor: runs babeld sessions while the mesh is active, restarts a failed one
with back-off, keeps babeld's interface list equal to the usable links, and keeps the mesh
table. It reports facts through one callback and knows nothing of clients.

Facts are `Applied` (one table entry changed; `.line` is what `monitor` clients get) and
`MESH_CHANGED` (the mesh state, the babeld process or the interfaces babeld uses changed).
"""

from __future__ import annotations

import math
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import structlog
import trio

from babbler.core.babeld_lines import TableLine
from babbler.core.backoff import Backoff
from babbler.core.errors import BabblerError
from babbler.core.readpolicy import Read, Reading, next_read
from babbler.core.table import Applied, MeshTable
from babbler.daemon.babeld.control import BabeldControl, LineCounts, refused
from babbler.daemon.babeld.launch import Launch
from babbler.daemon.babeld.session import Deadlines, Ended, Hooks, Session
from babbler.daemon.children import Failed, with_backoff
from babbler.daemon.links.kernel import Kernel
from babbler.daemon.wakeup import Signal, wait_any

log = structlog.get_logger("babbler.mesh")

IDLE = "idle"
STARTING = "starting"
RUNNING = "running"
RESTARTING = "restarting"
WAITING = "waiting-for-interface"


@dataclass(frozen=True)
class MeshTunables:
    """The supervisor's numbers, each with its reason; tests pass their own."""

    # babeld's restarts: 0.1 s doubling to 30 s; a babeld that ran `stable_period` seconds
    # without failing resets it: one that fails at once backs off to 30 s, one that crashes
    # now and then is back within 0.1 s each time.
    backoff_first: float = 0.1
    backoff_cap: float = 30.0
    stable_period: float = 5.0
    # Without a watcher this long before babeld stops monitoring: a client that reconnects,
    # or `babblerctl watch` run again, finds babeld still monitoring (core/readpolicy.py).
    unwatched_grace: float = 5.0
    # While nobody watches, the table is dumped this often: a route once a second instead of
    # 9.4 times at hello 0.1 s (core/readpolicy.py says when that pays).
    dump_interval: float = 1.0
    # And where the kernel says when babeld's routes change (Kernel.routes_trigger), only
    # this often once none has changed for `quiet_after` seconds (nor a link, nor a
    # watcher): a route that comes, goes or moves stirs it back to `dump_interval` at once.
    # The dumps were most of a quiet node's babblerd and a part of its babeld at 16 to 64
    # nodes (docs/benchmarks.md "The first minute"); what waits for them while quiet is
    # what moves no route (a metric, a neighbour's rtt). Seconds.
    quiet_interval: float = 5.0
    quiet_after: float = 5.0
    deadlines: Deadlines = field(default_factory=Deadlines)  # greeting, requests, stop


class Changed(Enum):
    MESH = "mesh"


MESH_CHANGED = Changed.MESH
Fact = Applied | Changed


@dataclass
class MeshHost:
    """What the supervisor needs from the daemon, passed in rather than reached for."""

    launch: Callable[[str], Launch]  # how to start babeld on this first interface
    interface_options: Callable[[str], str]  # options of this link's `interface` line
    usable_names: Callable[[], set[str]]
    links_changed: Signal
    kernel: Kernel
    report: Callable[[Fact], None]
    # A babeld started before the daemon (early.py), once, if it is still the right one.
    adopt: Callable[[], tuple[Launch, subprocess.Popen[bytes]] | None] = lambda: None
    hello_interval: Callable[[], float] = lambda: 0.1  # the configured one (reloadable)


class Mesh:
    def __init__(self, host: MeshHost, tunables: MeshTunables = MeshTunables()) -> None:
        self.host = host
        self.tunables = tunables
        self.table = MeshTable()
        self.state = IDLE
        self.session: Session | None = None
        self.version: str | None = None
        self.restarts = 0
        self.last_error: str | None = None
        self._last_error_at: float | None = None  # trio time
        self.told: dict[str, str] = {}  # interface babeld was told about -> its options
        self._running_since: float | None = None
        self.line_counts = LineCounts()  # over every babeld this daemon ran
        self._watched = True  # a client watches the table (else neighbour changes may wait)
        self._unwatched_since = -math.inf  # trio time the last watcher left
        self._watch_changed = Signal()
        self.monitoring = False  # babeld streams its changes (else: a dump every second)
        self._stirred = Signal()  # babeld's routes changed in the kernel
        self._stirred_at = -math.inf  # trio time of the last stir (routes, links, watchers)
        self._dumped_at = -math.inf  # trio time of the last dump

    @property
    def my_id(self) -> str | None:
        """The router id of the babeld that runs or is starting (babblerd picked it)."""
        session = self.session
        if session is None:
            return None
        return session.greeting.my_id if session.greeting else session.launch.router_id

    def running_for(self) -> float:
        """Seconds the current babeld has been running (0 while none runs)."""
        since = self._running_since
        return 0.0 if since is None else trio.current_time() - since

    def babeld_view(self) -> dict[str, Any]:
        """babeld's part of `status`; the daemon adds `my_id` (it knows the next one too)."""
        process = self.session.process if self.session else None
        return {
            "pid": process.pid if process and process.returncode is None else None,
            "version": self.version,
            "restarts": self.restarts,
            "last_error": self.last_error,
            "last_error_age_s": (
                None
                if self._last_error_at is None
                else round(trio.current_time() - self._last_error_at, 1)
            ),
        }

    def _set_state(self, state: str) -> None:
        if state != self.state:
            log.info("mesh state", mesh=state, previous=self.state)
            self.state = state
            self.host.report(MESH_CHANGED)

    def _on_table_line(self, line: TableLine) -> None:
        applied = self.table.apply(line)
        if applied is not None:
            self.host.report(applied)

    def set_watched(self, watched: bool) -> None:
        """Say whether anyone watches the table (a `monitor` or `watch` client). While
        nobody does, babeld's neighbour changes wait in the reader until the table is read
        (`catch_up`) or someone starts watching (babeld/reader.py), and after a grace the
        table is dumped instead of monitored (core/readpolicy.py)."""
        if self._watched == watched:
            return
        self._watched = watched
        if not watched and self.session is not None:  # (not the daemon's first word)
            self._unwatched_since = trio.current_time()
        control = self.session.control if self.session else None
        if control is not None:
            control.hold(not watched)
        self._watch_changed.notify()

    def catch_up(self) -> None:
        """Bring the table up to what babeld has said, before reading it; what changes is
        reported now (so: not from inside a read)."""
        control = self.session.control if self.session else None
        if control is not None:
            control.catch_up()

    def restart_babeld(self, reason: str) -> None:
        """End the running babeld session; the next one starts at once (not a failure)."""
        if self.session is not None:
            self.session.end(Ended(reason, failed=False))

    # -- supervision -------------------------------------------------------------------------

    async def run_while_active(self) -> None:
        """Run babeld until cancelled, restarting it with back-off (children.py's loop).
        Leaves no babeld behind."""
        tunables = self.tunables
        backoff = Backoff(
            tunables.backoff_first, tunables.backoff_cap, stable=tunables.stable_period
        )
        try:
            await with_backoff(self._run_once, backoff)
        finally:
            self._set_state(IDLE)

    async def _run_once(self) -> Failed | None:
        """One babeld session, once a link is usable: how it failed (None: it was ended, to
        start again at once)."""
        first = await self._wait_for_interface()
        self._set_state(STARTING if self.state in (IDLE, WAITING) else RESTARTING)
        ended = await self._one_session(first)
        ran = self.running_for()
        self._running_since = None
        if not ended.failed:
            log.info("restarting babeld", reason=ended.reason)
            return None
        self.last_error, self._last_error_at = ended.reason, trio.current_time()
        log.error("babeld failed", error=ended.reason, restarts=self.restarts + 1)
        self.restarts += 1
        return Failed(ran, self._restarting)

    def _restarting(self, delay: float) -> None:
        self._set_state(RESTARTING)
        self.host.report(MESH_CHANGED)
        log.info("restarting babeld", delay=delay)

    async def _one_session(self, first: str) -> Ended:
        adopted = self.host.adopt()
        launch, started = adopted if adopted else (self.host.launch(first), None)
        session = Session(
            launch,
            self.host.kernel.flush_babel_routes,
            self.line_counts,
            started,
            self.tunables.deadlines,
        )
        self.session = session
        self.told = {session.launch.first_interface: session.launch.interface_options}
        hooks = Hooks(
            on_line=self._on_table_line,
            on_spawned=lambda: self.host.report(MESH_CHANGED),
            on_reconnect=self.table.begin_resync,
            follow=self._follow,
            unwatched=lambda: not self._watched,
        )
        try:
            return await session.run(hooks)
        except (BabblerError, OSError) as error:
            # OSError: the private directory or babeld's files went wrong under us; the
            # daemon stays up and retries like any other failed start.
            return Ended(str(error))
        finally:
            self.session = None
            self.monitoring = False
            self.told.clear()
            for applied in self.table.flush_all():
                self.host.report(applied)
            self.host.report(MESH_CHANGED)

    async def _wait_for_interface(self) -> str:
        while True:
            event = self.host.links_changed.event()
            usable = sorted(self.host.usable_names())
            if usable:
                return usable[0]
            if self.state != RESTARTING:
                self._set_state(WAITING)
            await event.wait()

    async def _follow(self, control: BabeldControl) -> None:
        """babeld accepted `monitor` (and has dumped its table): keep its interfaces equal
        to the usable links. After a reconnection, entries the new dump lacks are flushed."""
        for applied in self.table.end_resync():
            self.host.report(applied)
        # The grace counts from the last watcher's leaving, not from here: a babeld that
        # starts while nobody has watched for a while streams nothing more (its first
        # seconds' monitor stream was most of babblerd's extra CPU in a mesh's first minute)
        self.monitoring = True
        self.version = control.greeting.version
        if self._running_since is None:
            self._running_since = trio.current_time()
        self._set_state(RUNNING)
        self.host.report(MESH_CHANGED)
        next_dump, self._stirred_at = 0.0, trio.current_time()  # a new babeld: busy at first
        while True:
            links = self.host.links_changed.event()
            watchers = self._watch_changed.event()
            stirred = self._stirred.event()
            await self._sync_interfaces(control)
            next_dump, wait = await self._read_table(control, next_dump)
            with trio.move_on_after(wait):
                await wait_any((links, watchers, stirred))
            if links.is_set() or watchers.is_set() or stirred.is_set():
                self._stirred_at = trio.current_time()  # dumps a second again
                next_dump = min(next_dump, self._dumped_at + self.tunables.dump_interval)

    async def follow_routes(self) -> None:
        """While the mesh runs (beside `run_while_active`): babeld's routes changed in the
        kernel, so stir the table's reading, at most once a `dump_interval` (a churn's
        events pile up meanwhile, read at once after)."""
        while True:
            await self.host.kernel.wait_for_route_change()
            self._stirred.notify()
            await trio.sleep(self.tunables.dump_interval)

    def _dump_interval(self) -> float:
        """Seconds to the next dump: `quiet_interval` once nothing stirred for `quiet_after`
        where the kernel says when babeld's routes change; else `dump_interval`."""
        tunables, now = self.tunables, trio.current_time()
        quiet = self.host.kernel.routes_trigger and now - self._stirred_at >= tunables.quiet_after
        return tunables.quiet_interval if quiet else tunables.dump_interval

    async def _read_table(self, control: BabeldControl, next_dump: float) -> tuple[float, float]:
        """Do what core/readpolicy.py says until it says wait. Returns when the next dump is
        due and how long to wait (math.inf: until links or watchers change)."""
        tunables = self.tunables
        while True:
            now = trio.current_time()
            reading = Reading(
                watched=self._watched,
                unwatched_since=self._unwatched_since,
                monitoring=self.monitoring,
                next_dump=next_dump,
                hello_interval=self.host.hello_interval(),
            )
            read, until = next_read(reading, now, tunables.unwatched_grace, tunables.dump_interval)
            if read is Read.WAIT:
                return next_dump, until - now
            if read is Read.MONITOR:  # the snapshot flushes what changed meanwhile
                reply = await control.read_table("monitor")
                if not reply.ok:
                    raise refused("monitor", reply)
                self.monitoring = True
                log.info("babeld monitoring", watched=self._watched)
            elif read is Read.UNMONITOR:
                await control.require("unmonitor")
                self.monitoring = False
                next_dump = now
                log.info(
                    "babeld not monitoring: nobody watches", dump_interval=tunables.dump_interval
                )
            else:
                await control.read_table("dump")
                self._dumped_at = trio.current_time()
                next_dump = self._dumped_at + self._dump_interval()

    async def _sync_interfaces(self, control: BabeldControl) -> None:
        """Tell babeld about new usable links, forget gone ones, and re-tell a link whose
        options changed (its cost followed a new speed): babeld ignores new options for a
        known interface, so it is flushed and added again."""
        usable = self.host.usable_names()
        changed = False
        for name in sorted(usable):
            options = self.host.interface_options(name)
            if self.told.get(name) == options:
                continue
            if name in self.told:
                await control.request(f"flush interface {name}")
                del self.told[name]
                log.info("babeld interface options changed", interface=name, options=options)
            reply = await control.request(f"interface {name} {options}")
            if reply.ok:
                self.told[name] = options
                changed = True
                log.info("babeld interface added", interface=name, options=options)
            else:
                log.warning(
                    "babeld refused interface",
                    interface=name,
                    reply=f"{reply.status} {reply.message}".strip(),
                )
        for name in sorted(self.told.keys() - usable):
            reply = await control.request(f"flush interface {name}")
            del self.told[name]
            changed = True
            log.info("babeld interface removed", interface=name, reply=reply.status)
        if changed:
            self.host.report(MESH_CHANGED)
