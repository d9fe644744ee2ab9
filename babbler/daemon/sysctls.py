"""Kernel settings babblerd changes (Linux /proc/sys), each recorded with the value it had
before and put back: on stop, and by the next start after a crash in the same boot, where
the setting still holds what babblerd set (a value someone changed since is theirs).

The record is `<state-dir>/sysctls`, JSON: {"boot": <boot id>, "set": {name: [before,
ours]}}, written before each change. Names are paths under /proc/sys
(`net/ipv4/conf/v1x2/forwarding`); a setting whose link went away is forgotten.
"""

from __future__ import annotations

import json
from pathlib import Path

from babbler.daemon.nodeid import write_state_file

FILE = "sysctls"
PROC_SYS = Path("/proc/sys")
BOOT_ID = PROC_SYS / "kernel" / "random" / "boot_id"


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


class Sysctls:
    def __init__(
        self, state_dir: Path, root: Path | None = PROC_SYS, boot: str | None = None
    ) -> None:
        """`root` None: a kernel whose settings babblerd leaves alone (`set` does nothing)."""
        self._state_dir = state_dir
        self._root = root
        self._boot = boot if boot is not None else (_read(BOOT_ID) or "")
        self.changed: dict[str, tuple[str, str]] = {}  # name -> (before, ours)
        self.problem: str | None = None  # the last change or record that failed

    def _save(self) -> None:
        text = json.dumps({"boot": self._boot, "set": self.changed}, sort_keys=True)
        self.problem = write_state_file(self._state_dir, FILE, text + "\n") or self.problem

    def read(self, name: str) -> str | None:
        """What `name` holds now (None: unreadable, or a kernel babblerd leaves alone)."""
        return None if self._root is None else _read(self._root / name)

    def set(self, name: str, value: str) -> bool:
        """Make `name` hold `value`, recording what it held first. False when it could not
        be read or written (the reason is in `problem`)."""
        if self._root is None:
            return True
        path = self._root / name
        now = _read(path)
        if now is None:
            self.problem = f"{path}: cannot read"
            return False
        if now == value:
            return True
        if name not in self.changed:
            self.changed[name] = (now, value)
            self._save()
        try:
            path.write_text(value)
        except OSError as error:
            self.problem = f"{path}: {error.strerror or error}"
            return False
        return True

    def restore(self, names: list[str] | None = None) -> list[str]:
        """Put back what babblerd changed (all, or `names`) where the setting still holds
        babblerd's value; returns the names put back."""
        done = []
        order = list(reversed(self.changed)) if names is None else names  # last set, first back
        for name in order:
            before, ours = self.changed.pop(name, (None, None))
            if self._root is None or before is None:
                continue
            path = self._root / name
            if _read(path) != ours:
                continue  # gone with its link, or changed by someone since: theirs
            try:
                path.write_text(before)
                done.append(name)
            except OSError as error:
                self.problem = f"{path}: {error.strerror or error}"
        self._save()
        return done

    def restore_leftovers(self) -> list[str]:
        """After a crash: what the last babblerd of this boot changed and did not restore."""
        if self._root is None:
            return []
        try:
            kept = json.loads((self._state_dir / FILE).read_text())
        except (OSError, ValueError):
            return []
        if not isinstance(kept, dict) or kept.get("boot") != self._boot:
            return []  # another boot: every setting is the system's own again
        entries = kept.get("set")
        if isinstance(entries, dict):
            for name, pair in entries.items():
                if isinstance(pair, list) and len(pair) == 2:
                    self.changed[str(name)] = (str(pair[0]), str(pair[1]))
        return self.restore()
