"""babblerd's children once forked (daemon/spawn.py): a `Child` logs its output, is waited
for and stopped (SIGTERM, then SIGKILL after a grace); `keep_running` restarts one that exits
with back-off (core/backoff.py), until cancelled. babeld's session and the bench responder
both run their child this way, each with its own back-off numbers; `with_backoff` is the
restart loop itself, which the mesh supervisor runs its babeld sessions in too.

A child is waited for through a pidfd on Linux; macOS has none, and there it is polled for
exit (POLL_INTERVAL).
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial

import structlog
import trio

from babbler.core.backoff import Backoff
from babbler.core.errors import EnvironmentProblem, exit_text
from babbler.daemon.spawn import STOP_GRACE, process_name, stop_async
from babbler.host.system import LINUX_HOST

log = structlog.get_logger("babbler.children")

# Lines of a child's output kept for error messages.
OUTPUT_TAIL = 20
# How often a child is checked for exit where there is no pidfd (macOS).
POLL_INTERVAL = 0.05


def pidfd_of(pid: int) -> int | None:
    """A pidfd for `pid` (Linux), None elsewhere. Raises ProcessLookupError when it is gone."""
    return os.pidfd_open(pid) if LINUX_HOST else None


async def exited(pid: int, pidfd: int | None) -> None:
    """Return once `pid` has exited: through its pidfd, or by polling without one."""
    if pidfd is not None:
        await trio.lowlevel.wait_readable(pidfd)
        return
    while process_name(pid) is not None:  # noqa: ASYNC110 (no event to wait on: polling)
        await trio.sleep(POLL_INTERVAL)


async def stop_stale(pid: int, ours: Callable[[], bool], say: Callable[[], None]) -> bool:
    """Stop a process an earlier babblerd left (a babeld, a bench responder) while `ours()`
    says `pid` still is it: checked once the process is held by a pidfd where the host has
    them, so a pid reused meanwhile is never signalled. `say` logs it, once it is ours.
    Returns whether it was stopped."""
    try:
        pidfd = pidfd_of(pid)
    except ProcessLookupError:
        return False
    try:
        if not ours():
            return False
        say()

        def send(signum: int) -> None:
            try:
                if pidfd is None:
                    os.kill(pid, signum)
                else:
                    signal.pidfd_send_signal(pidfd, signum)
            except ProcessLookupError:
                pass

        async def gone(grace: float) -> bool:
            with trio.move_on_after(grace):
                await exited(pid, pidfd)
            return not ours()

        await stop_async(send, gone, STOP_GRACE)
        return True
    finally:
        if pidfd is not None:
            os.close(pidfd)


class Child:
    """A running child of babblerd (forked by spawn.spawn): babeld, or the bench responder
    (`component` names it in the log). `pump_output` must run for its output to be logged
    and drained."""

    def __init__(self, popen: subprocess.Popen[bytes], component: str = "babeld") -> None:
        self._popen = popen
        self.component = component
        self.pid = self._popen.pid
        self._pidfd = pidfd_of(self.pid)
        self.tail: collections.deque[str] = collections.deque(maxlen=OUTPUT_TAIL)
        self.output_done = trio.Event()
        self.returncode: int | None = None

    async def pump_output(self) -> None:
        """Log every line the child prints (with its component) until it closes its output."""
        assert self._popen.stdout is not None
        stream = trio.lowlevel.FdStream(os.dup(self._popen.stdout.fileno()))
        self._popen.stdout.close()
        buffer = b""
        try:
            async with stream:
                while chunk := await stream.receive_some(65536):
                    buffer += chunk
                    *lines, buffer = buffer.split(b"\n")
                    for raw in lines:
                        self._log_line(raw)
                if buffer:
                    self._log_line(buffer)
        finally:
            self.output_done.set()

    def _log_line(self, raw: bytes) -> None:
        text = raw.decode("utf-8", "replace").rstrip()
        if text:
            self.tail.append(text)
            log.info(text, component=self.component, pid=self.pid)

    def output(self) -> str:
        return " | ".join(self.tail)

    async def wait(self) -> int:
        """Wait for the child to exit; returns its status (negative: killed by that signal)."""
        if self.returncode is None:
            if self._pidfd is not None:
                await trio.lowlevel.wait_readable(self._pidfd)
            while self._popen.poll() is None:  # noqa: ASYNC110 (no pidfd: poll our child)
                await trio.sleep(POLL_INTERVAL)
            self.returncode = self._popen.wait()
            if self._pidfd is not None:
                os.close(self._pidfd)
        return self.returncode

    async def stop(self, grace: float | None = None) -> int:
        """SIGTERM, then SIGKILL after `grace` seconds (default STOP_GRACE). Safe to call when
        the child has already exited."""
        grace = STOP_GRACE if grace is None else grace
        if self.returncode is None and self._popen.poll() is None:
            await stop_async(self._popen.send_signal, self._gone, grace)
        return await self.wait()

    async def _gone(self, grace: float) -> bool:
        with trio.move_on_after(grace):
            await self.wait()
            return True
        log.warning("child ignored SIGTERM, killing it", component=self.component, pid=self.pid)
        return False


@dataclass(frozen=True)
class Failed:
    """A run that failed: how long it ran (a long run resets the back-off) and how to say
    its end, given the pause before the next run."""

    ran: float
    say: Callable[[float], None]


async def with_backoff(run: Callable[[], Awaitable[Failed | None]], backoff: Backoff) -> None:
    """Run `run` again and again until cancelled: after one that failed, pause as long as
    `backoff` says (it is told how long the run ran, and the pause is said first); after one
    that ended without failing (None), at once. The one restart loop: `keep_running`'s and
    the mesh supervisor's (mesh.py)."""
    while True:
        failed = await run()
        if failed is None:
            continue
        backoff.ran(failed.ran)
        pause = backoff.delay()
        failed.say(pause)
        await trio.sleep(pause)


async def keep_running(
    start: Callable[[], subprocess.Popen[bytes]], component: str, backoff: Backoff
) -> None:
    """Run the child `start` forks until cancelled, then stop it; one that exits (or cannot
    be started: EnvironmentProblem) is started again after `backoff.delay()`."""

    async def run() -> Failed:
        started = trio.current_time()
        try:
            child = Child(start(), component)
        except EnvironmentProblem as problem:
            said = partial(log.error, f"{component} not started", error=str(problem))
            return Failed(0.0, lambda pause: said(pause=pause))
        log.info(f"{component} started", pid=child.pid)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(child.pump_output)
                status = await child.wait()
        finally:
            with trio.CancelScope(shield=True):
                await child.stop()
        # SIGTERM from outside is a stop, not a failure: systemd signals the whole service
        # group when it stops babblerd, and the child may go before babblerd cancels it.
        say = log.info if status == -signal.SIGTERM else log.warning
        ended = partial(say, f"{component} {exit_text(status)}", output=child.output())
        return Failed(trio.current_time() - started, lambda pause: ended(pause=pause))

    await with_backoff(run, backoff)
