"""The mesh supervisor: runs babeld while the mesh is active, restarts it with back-off,
keeps babeld's interface list equal to the usable links, and feeds the mesh table.

One babeld lifetime is a "session": clear stale files and routes, spawn, connect and read
the greeting within a deadline, `monitor`, then follow link changes. Whatever ends a session
(babeld exits, hangs, closes its socket) is recorded as its reason and cancels the rest, so a
babeld that dies at once is an error with its output, never a hang.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from ipaddress import IPv6Network
from pathlib import Path
from typing import Any

import structlog
import trio

from babbler.babeld.control import BabeldControl, connect
from babbler.babeld.process import BabeldProcess, babeld_args, clear_stale
from babbler.babeld.protocol import TableLine
from babbler.collision import CollisionWatch, hold_time
from babbler.config import Config
from babbler.errors import BabblerError, BabeldError, BabeldExited
from babbler.links.kernel import Kernel
from babbler.server import Hub
from babbler.state import VIEWS, Applied, MeshTable
from babbler.sync import Backoff, Signal

log = structlog.get_logger("babbler.mesh")

# From spawn to greeting; babeld's socket appears after ~0.15 s.
GREETING_DEADLINE = 5.0
# A babeld that ran this long without failing resets the back-off.
STABLE_PERIOD = 30.0
BACKOFF_INITIAL = 0.1
BACKOFF_CAP = 30.0

IDLE = "idle"
STARTING = "starting"
RUNNING = "running"
RESTARTING = "restarting"
WAITING = "waiting-for-interface"


@dataclass
class MeshHost:
    """What the supervisor needs from the daemon, passed in rather than reached for."""

    config: Callable[[], Config]
    node_range: Callable[[], str]
    usable_names: Callable[[], set[str]]
    links_changed: Signal
    kernel: Kernel
    hub: Hub
    on_change: Callable[[], None]  # mesh state, babeld or interfaces changed
    on_collision: Callable[[str], None] = lambda other_router: None


class PlannedRestart(BabblerError):
    """The daemon asked for a fresh babeld (its node range changed): no back-off, no count."""


class Mesh:
    def __init__(self, host: MeshHost) -> None:
        self.host = host
        self.table = MeshTable()
        self.state = IDLE
        self.process: BabeldProcess | None = None
        self.version: str | None = None
        self.my_id: str | None = None
        self.restarts = 0
        self.last_error: str | None = None
        self.told: set[str] = set()  # interfaces babeld has been told about
        self._end_reason: BabblerError | None = None
        self._session_scope: trio.CancelScope | None = None
        self._running_since: float | None = None
        self.collisions = CollisionWatch(hold_time(host.config().hello_interval))

    # -- state -------------------------------------------------------------------------------

    def _set_state(self, state: str) -> None:
        if state != self.state:
            log.info("mesh state", mesh=state, previous=self.state)
            self.state = state
            self.host.hub.publish_event({"type": "mesh", "mesh": state})
            self.host.on_change()

    def babeld_view(self) -> dict[str, Any]:
        return {
            "pid": self.process.pid if self.process and self.process.returncode is None else None,
            "version": self.version,
            "restarts": self.restarts,
            "my_id": self.my_id,
            "last_error": self.last_error,
        }

    def _on_table_line(self, line: TableLine) -> None:
        applied = self.table.apply(line)
        if applied is None:
            return
        self.host.hub.publish_lines([applied.line])
        if applied.real:
            self._publish_entry(applied)
        if line.kind == "route":
            self._check_collision(applied.entry, forget=applied.verb == "flush")

    def _check_collision(self, entry: TableLine, forget: bool) -> None:
        """Our own range announced, lastingly, by another router: two nodes share a node id."""
        route = VIEWS["route"](entry)
        if forget:
            self.collisions.forget(route)
            return
        own = IPv6Network(self.host.node_range())
        other = self.collisions.observe(route, self.my_id, own, trio.current_time())
        if other is not None:
            log.error(
                "node id collision: another router announces our range",
                prefix=route["prefix"],
                router_id=other,
                my_id=self.my_id,
            )
            self.collisions.reset()
            self.host.on_collision(other)

    def restart_babeld(self, reason: str) -> None:
        """End the running babeld session; the next one starts at once (not a failure)."""
        if self._session_scope is not None:
            self._end(PlannedRestart(reason))

    def _publish_entry(self, applied: Applied) -> None:
        """A `watch` event for a real change of one table entry."""
        kind = applied.entry.kind
        self.host.hub.publish_event(
            {"type": kind, "action": applied.verb, kind: VIEWS[kind](applied.entry)}
        )

    def _forget_table(self) -> None:
        gone = self.table.flush_all()
        self.host.hub.publish_lines([a.line for a in gone])
        for applied in gone:
            self._publish_entry(applied)

    # -- supervision -------------------------------------------------------------------------

    async def run_while_active(self) -> None:
        """Run babeld until cancelled, restarting it with back-off. Leaves no babeld behind."""
        backoff = Backoff(BACKOFF_INITIAL, BACKOFF_CAP)
        try:
            while True:
                first = await self._wait_for_interface()
                self._set_state(STARTING if self.state in (IDLE, WAITING) else RESTARTING)
                try:
                    await self._session(first)
                except PlannedRestart as planned:
                    log.info("restarting babeld", reason=str(planned))
                    self._running_since = None
                    continue
                except (BabblerError, OSError) as error:
                    # OSError: the private directory or babeld's files went wrong under us;
                    # the daemon stays up and retries like any other failed start.
                    self.last_error = str(error)
                    log.error("babeld failed", error=str(error), restarts=self.restarts + 1)
                self.restarts += 1
                if self._running_since is not None and (
                    trio.current_time() - self._running_since >= STABLE_PERIOD
                ):
                    backoff.reset()
                self._running_since = None
                delay = backoff.next()
                self._set_state(RESTARTING)
                self.host.on_change()
                log.info("restarting babeld", delay=delay)
                await trio.sleep(delay)
        finally:
            self._set_state(IDLE)

    async def _wait_for_interface(self) -> str:
        while True:
            event = self.host.links_changed.event()
            usable = sorted(self.host.usable_names())
            if usable:
                return usable[0]
            if self.state != RESTARTING:
                self._set_state(WAITING)
            await event.wait()

    def _end(self, reason: BabblerError) -> None:
        """The first reason wins; it ends the whole session."""
        if self._end_reason is None:
            self._end_reason = reason
        if self._session_scope is not None:
            self._session_scope.cancel()

    def _paths(self) -> dict[str, Path]:
        private = self.host.config().private_dir
        state_dir = self.host.config().state_dir
        return {
            "config": private / "babeld.conf",
            "socket": private / "babeld.sock",
            "pid": private / "babeld.pid",
            "state": state_dir / "babel-state",
        }

    def interface_options(self) -> str:
        return f"hello-interval {self.host.config().hello_interval:g}"

    async def _session(self, first: str) -> None:
        """One babeld lifetime. Returns only by raising the reason it ended."""
        config, paths = self.host.config(), self._paths()
        stale = await clear_stale(paths["pid"], paths["socket"])
        flushed = await self.host.kernel.flush_babel_routes()
        if stale or flushed:
            log.warning("cleared babeld leftovers", stale_pid=stale, flushed_routes=flushed)
        paths["config"].write_text("# generated by babblerd; settings are passed with -C\n")
        args = babeld_args(
            config.babeld,
            paths["config"],
            paths["socket"],
            paths["pid"],
            paths["state"],
            self.host.node_range(),
            first,
            self.interface_options(),
        )
        log.info("starting babeld", args=args)
        self._end_reason = None
        process = BabeldProcess(args)
        self.process = process
        self.host.on_change()
        try:
            async with trio.open_nursery() as nursery:
                self._session_scope = nursery.cancel_scope
                nursery.start_soon(process.pump_output)
                nursery.start_soon(self._end_on_exit, process)
                nursery.start_soon(self._drive, first, paths["socket"])
        finally:
            self._session_scope = None
            self.collisions = CollisionWatch(hold_time(config.hello_interval))
            with trio.CancelScope(shield=True):
                code = await process.stop()
                log.info("babeld stopped", pid=process.pid, status=code)
                self.told.clear()
                self.my_id = None
                self._forget_table()
                self.host.on_change()
        raise self._end_reason or BabeldError("babeld session ended")

    async def _end_on_exit(self, process: BabeldProcess) -> None:
        code = await process.wait()
        with trio.move_on_after(1.0):
            await process.output_done.wait()
        self._end(BabeldExited(code, process.output()))

    async def _drive(self, first: str, socket_path: Path) -> None:
        try:
            with trio.fail_after(GREETING_DEADLINE):
                control = await connect(socket_path)
        except trio.TooSlowError:
            self._end(BabeldError(f"babeld did not greet within {GREETING_DEADLINE:g} s"))
            return
        except BabeldError as error:
            self._end(error)
            return
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._read, control)
                await self._follow(control, first)
        finally:
            with trio.CancelScope(shield=True):
                await control.aclose()

    async def _read(self, control: BabeldControl) -> None:
        try:
            await control.read_forever(self._on_table_line)
        except BabeldError as error:
            self._end(error)

    async def _follow(self, control: BabeldControl, first: str) -> None:
        """Subscribe to babeld's table, then keep its interfaces equal to the usable links."""
        try:
            reply = await control.request("monitor")
            if not reply.ok:
                raise BabeldError(f"babeld refused monitor: {reply.status} {reply.message}")
            self.version = control.greeting.version
            self.my_id = control.greeting.my_id
            self.told = {first}
            self._running_since = trio.current_time()
            self._set_state(RUNNING)
            self.host.on_change()
            while True:
                event = self.host.links_changed.event()
                await self._sync_interfaces(control)
                await event.wait()
        except BabeldError as error:
            self._end(error)

    async def _sync_interfaces(self, control: BabeldControl) -> None:
        usable = self.host.usable_names()
        changed = False
        for name in sorted(usable - self.told):
            reply = await control.request(f"interface {name} {self.interface_options()}")
            if reply.ok:
                self.told.add(name)
                changed = True
                log.info("babeld interface added", interface=name)
            else:
                log.warning(
                    "babeld refused interface",
                    interface=name,
                    reply=f"{reply.status} {reply.message}".strip(),
                )
        for name in sorted(self.told - usable):
            reply = await control.request(f"flush interface {name}")
            self.told.discard(name)
            changed = True
            log.info("babeld interface removed", interface=name, reply=reply.status)
        if changed:
            self.host.on_change()
