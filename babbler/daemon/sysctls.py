"""Kernel settings babblerd changes, each recorded with the value it had before and put
back: on stop, and by the next start after a crash in the same boot, where the setting
still holds what babblerd set (a value someone changed since is theirs).

The record is `<state-dir>/sysctls`, JSON: {"boot": <boot id>, "set": {name: [before,
ours]}}, written before each change. Names are the platform's own: on Linux paths under
/proc/sys (`net/ipv4/conf/v1x2/forwarding`; a setting whose link went away is forgotten),
on macOS sysctl(8) names (`net.inet6.ip6.forwarding`).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from babbler.daemon.nodeid import write_state_file
from babbler.host.record import FILE, LINUX_BOOT, PROC_SYS, read_record

# How long an external command babblerd runs (sysctl(8) here; ifconfig, netstat, route and
# networksetup in links/darwin.py) may take: they answer in milliseconds (networksetup in
# ~0.1 s), so one that takes 3 s hangs. It is ended, and its caller sees it failed.
COMMAND_TIMEOUT = 3.0
# How long a value sysctl(8) read or wrote is taken as current. A pass (every 2 s and at
# each event) checks macOS's four settings, each a sysctl(8) process: in a 10-node macOS
# lab those reads were a third of the idle CPU. A setting someone changes by hand is seen
# within this; a change reads its setting afresh (the value to put back), and the stop
# reads each afresh before putting it back.
READ_FOR = 10.0


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


class Settings(Protocol):
    """Where the kernel's settings are read and written."""

    boot_name: str  # the setting that names this boot

    def read(self, name: str) -> str | None:
        """The value (None: unreadable or absent)."""

    def write(self, name: str, value: str) -> None:
        """Raises OSError."""

    def forget(self, name: str | None = None) -> None:
        """Read `name` (None: every setting) afresh from now on: a backend that keeps what
        it read drops it (before a value to put back is read)."""


class ProcSys:
    """Linux: files under /proc/sys (the network namespace's own net/ settings)."""

    boot_name = LINUX_BOOT

    def __init__(self, root: Path = PROC_SYS) -> None:
        self.root = root

    def read(self, name: str) -> str | None:
        return _read(self.root / name)

    def write(self, name: str, value: str) -> None:
        (self.root / name).write_text(value)

    def forget(self, name: str | None = None) -> None:
        return None  # every read is a file's: always afresh


Run = Callable[[Sequence[str]], subprocess.CompletedProcess[str]]


def _run(args: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(args), capture_output=True, text=True, timeout=COMMAND_TIMEOUT, check=False
    )


class SysctlCommand:
    """macOS: sysctl(8), each run ended after COMMAND_TIMEOUT. Blocks: the daemon calls it
    from a worker thread, never from the trio loop. `run` is replaced by the tests."""

    boot_name = "kern.bootsessionuuid"

    def __init__(self, run: Run = _run, clock: Callable[[], float] = time.monotonic) -> None:
        self._run = run
        self._clock = clock
        self._known: dict[str, tuple[float, str]] = {}  # name -> (when, value)

    def read(self, name: str) -> str | None:
        known = self._known.get(name)
        if known is not None and self._clock() - known[0] < READ_FOR:
            return known[1]
        try:
            done = self._run(["sysctl", "-n", name])
        except (OSError, subprocess.SubprocessError):  # no sysctl(8), or it hung
            return None
        value = done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else None
        if value is not None:
            self._known[name] = (self._clock(), value)
        return value

    def forget(self, name: str | None = None) -> None:
        if name is None:
            self._known.clear()
        else:
            self._known.pop(name, None)

    def write(self, name: str, value: str) -> None:
        try:
            done = self._run(["sysctl", "-w", f"{name}={value}"])
        except subprocess.TimeoutExpired:
            raise OSError(f"sysctl(8) gave no answer in {COMMAND_TIMEOUT:g} s") from None
        except subprocess.SubprocessError as error:
            raise OSError(str(error)) from None
        if done.returncode != 0:
            self._known.pop(name, None)
            raise OSError(done.stderr.strip() or f"sysctl -w {name}={value} failed")
        self._known[name] = (self._clock(), value)


class Sysctls:
    def __init__(self, state_dir: Path, settings: Settings | None, boot: str | None = None) -> None:
        """`settings` None: a kernel whose settings babblerd leaves alone (`set` does
        nothing). `boot`: this boot's name; by default read at first need (a command on
        macOS: not here, where the daemon may still run the trio loop)."""
        self._state_dir = state_dir
        self._settings = settings
        self._boot_name = boot
        self.changed: dict[str, tuple[str, str]] = {}  # name -> (before, ours)
        self.problem: str | None = None  # the last change or record that failed

    @property
    def _boot(self) -> str:
        if self._boot_name is None:
            found = self._settings.read(self._settings.boot_name) if self._settings else None
            self._boot_name = found or ""
        return self._boot_name

    def _save(self) -> None:
        text = json.dumps({"boot": self._boot, "set": self.changed}, sort_keys=True)
        self.problem = write_state_file(self._state_dir, FILE, text + "\n") or self.problem

    def read(self, name: str) -> str | None:
        """What `name` holds now (None: unreadable, or a kernel babblerd leaves alone)."""
        return None if self._settings is None else self._settings.read(name)

    def underlying(self, name: str) -> str | None:
        """What `name` would hold without babblerd: the value it held before babblerd set
        it, while it still holds babblerd's; else what it holds now."""
        now = self.read(name)
        before, ours = self.changed.get(name, (None, None))
        return before if before is not None and now == ours else now

    def set(self, name: str, value: str) -> bool:
        """Make `name` hold `value`, recording what it held first. False when it could not
        be read or written (the reason is in `problem`)."""
        if self._settings is None:
            return True
        now = self._settings.read(name)
        if now is not None and now != value:  # the value to put back: now's, not READ_FOR old
            self._settings.forget(name)
            now = self._settings.read(name)
        if now is None:
            self.problem = f"{name}: cannot read"
            return False
        if now == value:
            return True
        before = self.changed[name][0] if name in self.changed else now
        self.changed[name] = (before, value)  # ours is what it holds now: restore checks it
        self._save()
        try:
            self._settings.write(name, value)
        except OSError as error:
            self.problem = f"{name}: {error.strerror or error}"
            return False
        return True

    def restore(self, names: list[str] | None = None) -> list[str]:
        """Put back what babblerd changed (all, or `names`) where the setting still holds
        babblerd's value; returns the names put back."""
        done = []
        if self._settings is not None:
            self._settings.forget()  # what a setting holds now, not what it held a while ago
        order = list(reversed(self.changed)) if names is None else names  # last set, first back
        for name in order:
            before, ours = self.changed.pop(name, (None, None))
            if self._settings is None or before is None:
                continue
            if self._settings.read(name) != ours:
                continue  # gone with its link, or changed by someone since: theirs
            try:
                self._settings.write(name, before)
                done.append(name)
            except OSError as error:
                self.problem = f"{name}: {error.strerror or error}"
        self._save()
        return done

    def restore_leftovers(self) -> list[str]:
        """After a crash: what the last babblerd of this boot changed and did not restore."""
        if self._settings is None:
            return []
        try:
            self.changed.update(read_record(self._state_dir, self._boot))
        except OSError:
            return []
        return self.restore()
