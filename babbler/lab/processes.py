"""The lab's daemons: started in their namespaces, watched, and ended by pid only.

A `Daemons` belongs to one Lab instance and holds the processes that instance started, so
their exit status can be read; a lab loaded from lab.json ends its daemons by recorded pid,
checking that the pid is still the process it started, in the node's namespace.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path

from babbler.client import Disconnected, NotRunning, ask
from babbler.daemon.spawn import process_name, stop
from babbler.lab import wait
from babbler.lab.files import open_log
from babbler.lab.topology import LabError

STOP_TIMEOUT = 5.0
# `end_all_in` lists a namespace's processes again after ending them, at most this often:
# each round ends what the one before left or what started meanwhile.
END_ROUNDS = 3
SERVE_TIMEOUT = 15.0
NETNS_DIR = Path("/run/netns")  # where `ip netns add` names namespaces
# What babblerd's bench responder's command line holds (`python -m` of it: PROGRAM in
# daemon/responder.py, which the lab may not import).
RESPONDER = "babbler.bench.responder"


def alive(pid: int, marker: str, netns: str | None = None) -> bool:
    """The process is alive (not a zombie), its command line contains `marker` and, when
    `netns` is given, it runs in that namespace: it is still the one we started, not a later
    process that got its pid, nor one a record names that the lab never started."""
    if process_name(pid) is None:
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return False
    return marker in cmdline and (netns is None or in_netns(pid, netns))


def _namespace(path: str | Path) -> tuple[int, int] | None:
    """The identity of the network namespace at `path` (a process's ns/net, a name under
    NETNS_DIR), or None when there is none."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino


def in_netns(pid: int, netns: str) -> bool:
    """The process runs in the named network namespace (`ip netns`'s, under NETNS_DIR)."""
    theirs = _namespace(f"/proc/{pid}/ns/net")
    return theirs is not None and theirs == _namespace(NETNS_DIR / netns)


def pids_in(netns: str) -> list[int]:
    """Every process running in the named namespace (the lab's own: whatever runs there
    was started for the lab, by it or by someone through `babbler-lab exec`)."""
    named = _namespace(NETNS_DIR / netns)
    if named is None:
        return []
    pids = (int(entry) for entry in os.listdir("/proc") if entry.isdigit())
    return [pid for pid in pids if _namespace(f"/proc/{pid}/ns/net") == named]


def end(pid: int, marker: str, netns: str | None = None, timeout: float = STOP_TIMEOUT) -> None:
    """SIGTERM the process if it is still the one we started (`alive`), then SIGKILL after
    `timeout`."""
    _end_each([pid], marker, netns, timeout)


def end_all_in(netns: str, marker: str = "", timeout: float = STOP_TIMEOUT) -> list[int]:
    """End every process in the namespace whose command line contains `marker` (SIGTERM,
    then SIGKILL after `timeout`), and again while any is left, for up to END_ROUNDS
    rounds: one started there meanwhile goes too (a babblerd that is ending restarts its
    responder, which on macOS does not die with it). The pids it ended."""
    ended: set[int] = set()
    for _ in range(END_ROUNDS):
        pids = [pid for pid in pids_in(netns) if alive(pid, marker, netns)]
        if not pids:
            break
        _end_each(pids, marker, netns, timeout)
        ended.update(pids)
    return sorted(ended)


def _end_each(pids: Sequence[int], marker: str, netns: str | None, timeout: float) -> None:
    """End the processes together (`spawn.stop`: SIGTERM, then SIGKILL after `timeout`),
    each only while it is `alive` and through a pidfd opened before that check, so a pid
    reused after the check is never signalled."""
    handles = {}
    try:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):  # it has gone already
                handles[pid] = os.pidfd_open(pid)

        def live() -> list[int]:
            return [pid for pid in handles if alive(pid, marker, netns)]

        def send(signum: int) -> None:
            for pid in live():
                with contextlib.suppress(ProcessLookupError):  # it exited since the check
                    signal.pidfd_send_signal(handles[pid], signum)

        stop(send, lambda grace: wait.until(lambda: not live(), grace, every=0.02), timeout)
    finally:
        for handle in handles.values():
            os.close(handle)


def last_error(log: Path) -> str | None:
    """The daemon's own one-line error (`babblerd: ...`) from its log, if it printed one."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return None
    said = [line for line in lines if line.startswith("babblerd: ")]
    return said[-1].removeprefix("babblerd: ") if said else None


class Daemons:
    """babblerd processes started by one lab instance, by pid."""

    def __init__(self) -> None:
        self._children: dict[int, subprocess.Popen[bytes]] = {}

    def spawn(self, args: Sequence[str], log: Path) -> int:
        out = open_log(log)
        try:
            process = subprocess.Popen(
                list(args), stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True
            )
        finally:
            os.close(out)
        self._children[process.pid] = process
        return process.pid

    def _process(self, pid: int | None, name: str) -> subprocess.Popen[bytes]:
        process = self._children.get(pid or -1)
        if process is None:
            raise LabError(f"{name}: not started by this process")
        return process

    def exited(self, pid: int | None, name: str) -> int | None:
        """The exit status of a daemon started here, or None while it runs."""
        return self._process(pid, name).poll()

    def wait_served(self, pid: int | None, name: str, socket: Path, log: Path) -> None:
        """Wait until the daemon answers on its socket. Raises LabError with the daemon's
        own message when it exits first."""
        process = self._process(pid, name)

        def served() -> bool:
            if process.poll() is not None:
                said = last_error(log)
                raise LabError(
                    f"babblerd on {name} exited with {process.returncode}"
                    + (f": {said}" if said else "")
                )
            try:
                ask(socket, "status", timeout=2)
            except (NotRunning, Disconnected, OSError):
                return False
            return True

        if not wait.until(served, SERVE_TIMEOUT, every=0.02):
            raise LabError(f"babblerd on {name} did not serve {socket} within {SERVE_TIMEOUT:g} s")

    def reap(self, pid: int) -> None:
        """Collect the exit status of a daemon started here once it has been ended."""
        process = self._children.pop(pid, None)
        if process is not None:
            try:
                process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def wait_exit(self, pid: int | None, name: str, timeout: float = STOP_TIMEOUT) -> int:
        """The exit status of a daemon started here. Raises LabError on timeout."""
        try:
            return self._process(pid, name).wait(timeout)
        except subprocess.TimeoutExpired:
            raise LabError(f"babblerd on {name} still running after {timeout:g} s") from None
