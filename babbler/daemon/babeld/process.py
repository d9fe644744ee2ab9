"""The babeld child process: stale-file clean-up, spawn, output, wait and stop.

babeld must never outlive babblerd, also when babblerd is killed with SIGKILL. Linux ties
PR_SET_PDEATHSIG to the thread that forked, and trio's process helpers fork from worker
threads that retire when idle (the child then dies ~10 s later, BABELD.md), so babeld is
forked from the trio thread itself and waited for through a pidfd.

macOS has neither: there babeld is polled for exit (POLL_INTERVAL), and a babeld left by a
killed babblerd is stopped through its pid file at the next start (launchd restarts at once).
"""

from __future__ import annotations

import collections
import contextlib
import os
import signal
import subprocess
from pathlib import Path

import structlog
import trio

from babbler.core.platform import IS_LINUX

log = structlog.get_logger("babbler.babeld")

# How long babeld gets to exit after SIGTERM; it takes 30-60 ms when healthy.
STOP_GRACE = 2.0
# Lines of babeld's output kept for error messages.
OUTPUT_TAIL = 20
PR_SET_PDEATHSIG = 1
# How often babeld is checked for exit where there is no pidfd (macOS).
POLL_INTERVAL = 0.05


def process_name(pid: int) -> str | None:
    """The name of a live process, or None. A zombie counts as gone: orphans that died can
    stay zombies for a while where PID 1 reaps slowly."""
    if not IS_LINUX:
        return _ps_name(pid)
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # "pid (comm) state ...": comm may hold spaces and parentheses.
    name, _, rest = stat.partition("(")[2].rpartition(")")
    return None if rest.split()[:1] == ["Z"] else name


def _ps_name(pid: int) -> str | None:
    """process_name without /proc (macOS): ps's state and command name."""
    result = subprocess.run(
        ["ps", "-o", "stat=,comm=", "-p", str(pid)], capture_output=True, text=True, check=False
    )
    state, _, command = result.stdout.strip().partition(" ")
    if result.returncode != 0 or not command or state.startswith("Z"):
        return None
    return Path(command.strip()).name


async def _exited(pid: int, pidfd: int | None) -> None:
    """Return once `pid` has exited: through its pidfd, or by polling without one."""
    if pidfd is not None:
        await trio.lowlevel.wait_readable(pidfd)
        return
    while process_name(pid) is not None:  # noqa: ASYNC110 (no event to wait on: polling)
        await trio.sleep(POLL_INTERVAL)


def _pidfd(pid: int) -> int | None:
    """A pidfd for `pid` (Linux), None elsewhere. Raises ProcessLookupError when it is gone."""
    return os.pidfd_open(pid) if IS_LINUX else None


def _read_pid(pid_file: Path) -> int:
    """The pid in babeld's pid file; 0 when absent, unreadable, or a symlink (never followed:
    a planted link must not make us signal whatever process it names)."""
    try:
        fd = os.open(pid_file, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return 0
    try:
        with os.fdopen(fd) as file:
            return int(file.read(32).strip())
    except (OSError, ValueError):
        return 0


def _remove(*paths: Path) -> None:
    """Remove files without following symlinks; absent ones are fine."""
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


async def clear_stale(pid_file: Path, control_socket: Path) -> int | None:
    """Stop a babeld left running by an earlier daemon (its pid file names a live babeld),
    then remove the pid file and socket babeld would refuse to start with.
    Returns the pid that was stopped, if any."""
    pid = _read_pid(pid_file)
    stopped = None
    if pid > 0 and process_name(pid) == "babeld":
        log.warning("stopping stale babeld", pid=pid, pid_file=str(pid_file))
        try:
            pidfd = _pidfd(pid)
        except ProcessLookupError:
            pass
        else:
            try:
                os.kill(pid, signal.SIGTERM)
                with trio.move_on_after(STOP_GRACE):
                    await _exited(pid, pidfd)
                if process_name(pid) == "babeld":
                    os.kill(pid, signal.SIGKILL)
            finally:
                if pidfd is not None:
                    os.close(pidfd)
        stopped = pid
    _remove(pid_file, control_socket)
    return stopped


class BabeldProcess:
    """A running babeld (spawned by babeld.launch.spawn), or another child babblerd runs
    the same way (the bench responder: `component` names it in the log). `pump_output`
    must run for output to be logged and drained."""

    def __init__(self, popen: subprocess.Popen[bytes], component: str = "babeld") -> None:
        self._popen = popen
        self.component = component
        self.pid = self._popen.pid
        self._pidfd = _pidfd(self.pid)
        self.tail: collections.deque[str] = collections.deque(maxlen=OUTPUT_TAIL)
        self.output_done = trio.Event()
        self.returncode: int | None = None

    async def pump_output(self) -> None:
        """Log every line babeld prints (component=babeld) until it closes its output."""
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
        """Wait for babeld to exit; returns its status (negative: killed by that signal)."""
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
        babeld has already exited."""
        grace = STOP_GRACE if grace is None else grace
        if self.returncode is None and self._popen.poll() is None:
            self._popen.send_signal(signal.SIGTERM)
            with trio.move_on_after(grace):
                return await self.wait()
            log.warning("child ignored SIGTERM, killing it", component=self.component, pid=self.pid)
            self._popen.kill()
        return await self.wait()
