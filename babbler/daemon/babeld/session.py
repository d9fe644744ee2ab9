"""One babeld lifetime (a "session"), and what babeld is started with.

A session clears stale files and routes, writes babeld's `-c` file, spawns babeld, connects
and reads the greeting within a deadline, subscribes with `monitor`, then hands the control
connection to the caller's `follow`. Whatever ends it first (babeld exits, hangs, closes its
socket, or the owner asks for a fresh one) is recorded as the reason and cancels the rest;
`run` returns that reason, so a babeld that dies at once is a reason with its output, never
a hang.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import structlog
import trio

from babbler.core.babeld_lines import TableLine, telling
from babbler.core.errors import BabblerError, BabeldError, BabeldExited
from babbler.daemon.babeld import sndbuf
from babbler.daemon.babeld.control import (
    REQUEST_DEADLINE,
    BabeldControl,
    ControlCut,
    Greeting,
    LineCounts,
    connect,
)
from babbler.daemon.babeld.launch import Launch, write_private
from babbler.daemon.babeld.process import clear_stale
from babbler.daemon.babeld.reader import GATHER
from babbler.daemon.children import Child
from babbler.daemon.spawn import ROUTING_NICE, STOP_GRACE, spawn

log = structlog.get_logger("babbler.babeld")

# Control connections babeld may cut (it does when a write to us waits 100 ms) in one
# session before the session counts as failed and babeld is restarted.
CUT_LIMIT = 10
# Before connecting again after a cut (babeld's exit, if that is what it was, shows first).
RECONNECT_PAUSE = 0.05
# How long a finished babeld's output may take to drain into the log and the error.
OUTPUT_DRAIN = 1.0


@dataclass(frozen=True)
class Deadlines:
    """How long babeld gets, each time, before the session ends as failed."""

    greeting: float = 5.0  # from spawn to greeting; babeld's socket appears after ~0.15 s
    request: float = REQUEST_DEADLINE  # for each control request's status line
    stop_grace: float = STOP_GRACE  # from SIGTERM to SIGKILL; babeld exits in 30-60 ms


@dataclass(frozen=True)
class Hooks:
    """What a session's owner is told and asked."""

    on_line: Callable[[TableLine], None]  # every table line babeld writes (repeats dropped)
    on_spawned: Callable[[], None]  # babeld's process exists
    on_reconnect: Callable[[], None]  # a new dump of the same babeld's table follows
    follow: Callable[[BabeldControl], Awaitable[None]]  # runs once `monitor` is accepted
    # Nobody watches the table: the reader may hold neighbour changes (reader.py).
    unwatched: Callable[[], bool] = lambda: False


@dataclass(frozen=True)
class Ended:
    """Why a session ended. `failed`: counted as a restart and backed off (babeld died,
    hung or misbehaved); otherwise the owner asked for a fresh babeld."""

    reason: str
    failed: bool = True


class Session:
    """One babeld lifetime. `process` and `greeting` are set as the session gets there."""

    def __init__(
        self,
        launch: Launch,
        flush_routes: Callable[[], Awaitable[int]],
        counts: LineCounts | None = None,
        started: subprocess.Popen[bytes] | None = None,
        deadlines: Deadlines = Deadlines(),
    ) -> None:
        """`started`: a babeld already spawned with `launch` (the early start) to adopt."""
        self.launch = launch
        self.deadlines = deadlines
        self._started = started
        self._widen_failed = False
        self._counts = counts
        self._flush_routes = flush_routes
        self.process: Child | None = None
        self.greeting: Greeting | None = None
        self.control: BabeldControl | None = None  # the control connection being read
        self._ended: Ended | None = None
        self._scope: trio.CancelScope | None = None

    def end(self, ended: Ended) -> None:
        """End the session; the first reason wins."""
        if self._ended is None:
            self._ended = ended
        if self._scope is not None:
            self._scope.cancel()

    def _fail(self, error: BabblerError) -> None:
        self.end(Ended(str(error)))

    async def run(self, hooks: Hooks) -> Ended:
        """Run babeld until something ends it; babeld is stopped before this returns.
        `on_line` gets every table line; `follow` runs once `monitor` is accepted.
        Raises EnvironmentProblem when babeld cannot be executed at all, OSError when the
        private directory went wrong under us."""
        if self._started is not None:
            log.info("following babeld started early", args=self.launch.args())
            process = Child(self._started)
        else:
            files = self.launch.files
            stale = await clear_stale(files.pid, files.socket)
            flushed = await self._flush_routes()
            if stale or flushed:
                log.warning("cleared babeld leftovers", stale_pid=stale, flushed_routes=flushed)
            write_private(files.config, self.launch.config_text())
            args = self.launch.args()
            log.info("starting babeld", args=args)
            process = Child(spawn(args, tied=self.launch.tied, nice=ROUTING_NICE))
        self.process = process
        hooks.on_spawned()
        try:
            async with trio.open_nursery() as nursery:
                self._scope = nursery.cancel_scope
                if self._ended is not None:  # ended while starting
                    nursery.cancel_scope.cancel()
                nursery.start_soon(process.pump_output)
                nursery.start_soon(self._end_on_exit, process)
                nursery.start_soon(self._drive, hooks)
        finally:
            self._scope = None
            with trio.CancelScope(shield=True):
                code = await process.stop(self.deadlines.stop_grace)
                log.info("babeld stopped", pid=process.pid, status=code)
        return self._ended or Ended("babeld session ended")

    async def _end_on_exit(self, process: Child) -> None:
        code = await process.wait()
        with trio.move_on_after(OUTPUT_DRAIN):
            await process.output_done.wait()
        self._fail(BabeldExited(code, telling(process.tail)))

    async def _drive(self, hooks: Hooks) -> None:
        """Connect, subscribe, follow. When babeld cuts the connection but stays up (a slow
        reader: babeld waits 100 ms for a write, then shuts the socket down), connect
        again instead of restarting it: its routes and router id, and therefore every
        other node's routes, stay as they are."""
        cuts = 0
        while True:
            try:
                with trio.fail_after(self.deadlines.greeting):
                    socket = self.launch.files.socket
                    control = await connect(socket, self._counts, self.deadlines.request)
            except trio.TooSlowError:
                deadline = self.deadlines.greeting
                self._fail(BabeldError(f"babeld did not greet within {deadline:g} s"))
                return
            except BabeldError as error:
                self._fail(error)
                return
            # babeld made it 0700 under our umask (sockets ignore x): say who may use it.
            with contextlib.suppress(OSError):
                os.chmod(self.launch.files.socket, 0o600)
            if self._widen_buffer():
                control.gather = GATHER
            if cuts:
                hooks.on_reconnect()
            control.hold(hooks.unwatched())
            self.control = control
            try:
                if not await self._connection(control, hooks):
                    return
            finally:
                self.control = None
                with trio.CancelScope(shield=True):
                    await control.aclose()
            cuts += 1
            if cuts > CUT_LIMIT:
                self._fail(BabeldError(f"babeld closed its control connection {cuts} times"))
                return
            log.warning("babeld closed its control connection; connecting again", cuts=cuts)
            # A babeld that is dying also closes it: give its exit the chance to end the
            # session with the real reason before trying its socket again.
            await trio.sleep(RECONNECT_PAUSE)

    def _widen_buffer(self) -> bool:
        """Room for a second of babeld's lines on its side of our connection (sndbuf.py).
        True when it was made."""
        if self.process is None:
            return False
        try:
            return sndbuf.widen(self.process.pid) > 0
        except OSError as error:
            if not self._widen_failed:
                log.info("cannot widen babeld's control buffer", error=str(error))
            self._widen_failed = True
            return False

    async def _connection(self, control: BabeldControl, hooks: Hooks) -> bool:
        """Serve one control connection; True when babeld cut it (and may be reconnected)."""
        async with trio.open_nursery() as nursery:

            async def read() -> None:
                try:
                    await control.read_forever(hooks.on_line)
                except ControlCut:
                    nursery.cancel_scope.cancel()
                except BabeldError as error:
                    self._fail(error)

            nursery.start_soon(read)
            await self._follow(control, hooks.follow)
        return control.cut

    async def _follow(
        self, control: BabeldControl, follow: Callable[[BabeldControl], Awaitable[None]]
    ) -> None:
        try:
            await control.require("monitor")
            self.greeting = control.greeting
            await follow(control)
        except BabeldError as error:
            if not control.cut:  # a cut is the reader's to handle
                self._fail(error)
