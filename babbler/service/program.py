"""The program a service would run: this babblerd, its interpreter and its package, and
whether they are root's alone (plan.untrusted judges; this module reads the file system).
Shared by the systemd and launchd installs."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

import babbler
from babbler.service.plan import HIDDEN, Chain, PathFacts, untrusted


def this_program() -> Path:
    """The babblerd script this process runs as, resolved (a symlink on PATH is followed,
    so the service names the file itself)."""
    name = sys.argv[0]
    found = shutil.which(name) if os.sep not in name else name
    return Path(found or name).resolve()


def chain(path: Path) -> Chain:
    """Every path from / down to `path` resolved, as lstat sees it."""
    target = path.resolve()
    steps = []
    for step in (*reversed(target.parents), target):
        try:
            info = os.lstat(step)
        except OSError:
            continue
        steps.append(PathFacts(step, info.st_uid, info.st_mode))
    return Chain(target, tuple(steps))


def imported_from() -> list[Path]:
    """What the service would read code from: the interpreter, the babbler package, and
    every directory on the import path that exists."""
    paths = [Path(sys.executable), Path(babbler.__file__).parent]
    paths += [Path(entry) for entry in sys.path if entry and Path(entry).is_dir()]
    return paths


def program_problem(
    program: Path, hidden: Sequence[Path] = HIDDEN, fix: str | None = None
) -> str | None:
    """Why a root service must not run `program` (one line), or None. `hidden`: where the
    service cannot see (systemd's ProtectHome; none under launchd); `fix`: the way out."""
    return untrusted([chain(path) for path in (program, *imported_from())], hidden, fix)


def babeld_problem(found: str, hidden: Sequence[Path], fix: str) -> str | None:
    """Why the service must not run the babeld at `found` (one line), or None: it runs
    with the service's rights, so it must be root's alone and where the service sees."""
    return untrusted([chain(Path(found))], hidden, fix)
