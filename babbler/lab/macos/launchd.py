"""The macOS lab's launchd: what a node's `launchctl` acts on, run by the node's command
server (`server`) in the node's namespace. `launchctl bootstrap system PLIST` reads the
plist strictly (`launchctl.job`) and, with RunAtLoad or KeepAlive, starts its program with
its arguments, environment and output files; KeepAlive starts it again when it exits (at
most once every ThrottleInterval); `launchctl bootout` sends SIGTERM and waits up to
ExitTimeOut before SIGKILL; when the program exits, what is left of its process group is
killed, as launchd does without AbandonProcessGroup (launchd.plist(5)).

What the lab adds to the job's environment: the node's commands first on PATH (on a Mac
ifconfig and the rest are in /sbin and /usr/sbin; here they are the node's) and netifaces
as on a Mac on PYTHONPATH (`site`), as every process on a lab node has them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from babbler.lab.macos import launchctl
from babbler.lab.macos.commands import Answer, Failed
from babbler.lab.macos.launchctl import Job, State

SITE = Path(__file__).parent / "site"
EXEC_FAILED = 78  # EX_CONFIG: what launchd records when the program cannot be started


@dataclass
class _Loaded:
    job: Job
    stopping: threading.Event = field(default_factory=threading.Event)
    process: subprocess.Popen[bytes] | None = None
    runs: int = 0
    last_exit: str = "(never exited)"
    thread: threading.Thread | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


class Launchd:
    """The system domain of one lab Mac: its loaded jobs and their processes."""

    def __init__(self, commands: Path) -> None:
        self._commands = commands  # the node's commands (its bin directory)
        self._jobs: dict[str, _Loaded] = {}
        self._lock = threading.Lock()

    def answer(self, args: Sequence[str]) -> Answer:
        try:
            ask = launchctl.read_args(list(args))
            if ask.verb == "bootstrap" and ask.path is not None:
                self.bootstrap(ask.path)
                return Answer(0, "")
            if ask.verb == "bootout":
                self.bootout(ask.label if ask.label is not None else self._label_of(ask.path))
                return Answer(0, "")
            return Answer(0, self.print(ask.label or ""))
        except Failed as failed:
            return Answer(failed.code, failed.out, failed.text + "\n")

    # -- the verbs ---------------------------------------------------------------------------

    def bootstrap(self, path: str) -> None:
        job = launchctl.job(path, _read_plist(path))
        with self._lock:
            if job.label in self._jobs:
                raise launchctl.already_loaded()
            loaded = _Loaded(job)
            self._jobs[job.label] = loaded
        if job.run_at_load or job.keep_alive:
            loaded.thread = threading.Thread(
                target=self._supervise, args=(loaded,), name=job.label, daemon=True
            )
            loaded.thread.start()

    def bootout(self, label: str) -> None:
        with self._lock:
            loaded = self._jobs.get(label)
        if loaded is None:
            raise launchctl.not_loaded()
        with loaded.lock:
            loaded.stopping.set()
            process = loaded.process
        if process is not None and process.poll() is None:
            _signal(process.pid, signal.SIGTERM)
        if loaded.thread is not None:
            loaded.thread.join(loaded.job.exit_timeout)
            if loaded.thread.is_alive() and process is not None:
                _signal(process.pid, signal.SIGKILL)
                loaded.thread.join()
        with self._lock:
            self._jobs.pop(label, None)

    def print(self, label: str) -> str:
        with self._lock:
            loaded = self._jobs.get(label)
        if loaded is None:
            raise launchctl.not_found(label)
        with loaded.lock:
            process = loaded.process
            pid = process.pid if process is not None and process.poll() is None else None
            state = State(pid=pid, runs=loaded.runs, last_exit=loaded.last_exit)
        return launchctl.printed(loaded.job, state)

    def stop_all(self) -> None:
        """Every job booted out (the server's end)."""
        with self._lock:
            labels = list(self._jobs)
        for label in labels:
            self.bootout(label)

    def _label_of(self, path: str | None) -> str:
        with self._lock:
            for label, loaded in self._jobs.items():
                if loaded.job.path == path:
                    return label
        raise launchctl.not_loaded()

    # -- the job's process -------------------------------------------------------------------

    def _supervise(self, loaded: _Loaded) -> None:
        job = loaded.job
        while True:
            with loaded.lock:
                if loaded.stopping.is_set():
                    return
                started = time.monotonic()
                loaded.runs += 1
                try:
                    loaded.process = self._spawn(job)
                except OSError:
                    loaded.process = None
                    loaded.last_exit = str(EXEC_FAILED)
            process = loaded.process
            if process is not None:
                code = process.wait()
                _signal_group(process.pid)  # what it left in its process group
                with loaded.lock:
                    loaded.last_exit = str(code)
            if not job.keep_alive:
                return
            # at most one start every ThrottleInterval; a bootout ends the wait at once
            if loaded.stopping.wait(max(0.0, job.throttle - (time.monotonic() - started))):
                return

    def _spawn(self, job: Job) -> subprocess.Popen[bytes]:
        environment = launchctl.environment(job)
        environment["PATH"] = f"{self._commands}{os.pathsep}{environment['PATH']}"
        environment["PYTHONPATH"] = str(SITE)
        out = _log(job.stdout)
        err = out if job.stderr == job.stdout else _log(job.stderr)
        try:
            return subprocess.Popen(
                list(job.arguments),
                executable=job.program,
                stdin=subprocess.DEVNULL,
                stdout=out or subprocess.DEVNULL,
                stderr=err or subprocess.DEVNULL,
                cwd=job.directory,
                env=environment,
                start_new_session=True,  # its own process group, as launchd's jobs have
                close_fds=True,
            )
        finally:
            for file in {out, err}:
                if file is not None:
                    file.close()


def _read_plist(path: str) -> bytes:
    """The plist's bytes; as launchd, only from a file root's and written by root alone."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise launchctl.missing(path) from None
    except OSError as error:
        raise launchctl.bad(path, error.strerror or "cannot be read") from None
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(file.fileno())
        if info.st_uid != 0 or stat.S_IMODE(info.st_mode) & 0o022:
            raise launchctl.bad(path, "Path had bad ownership/permissions")
        return file.read()


def _log(path: str | None) -> IO[bytes] | None:
    if path is None:
        return None
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    return os.fdopen(fd, "ab")


def _signal(pid: int, number: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, number)


def _signal_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
