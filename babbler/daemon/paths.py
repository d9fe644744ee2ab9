"""The daemon's directories: created with the right modes, refused when unsafe.

A run or state directory that is a symlink, or owned by someone other than root or the user the
daemon runs as, could let someone else redirect what the daemon writes; the daemon refuses it
with a clear message.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from babbler.core.errors import EnvironmentProblem


def check_dir(path: Path) -> None:
    """Refuse `path` if it, or the nearest part of it that exists, cannot be our directory:
    a symlink, not a directory, or owned by someone else. Creates nothing.
    Raises EnvironmentProblem."""
    for part in (path, *path.parents):
        try:
            info = part.lstat()
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as error:
            raise EnvironmentProblem(f"refusing {path}: {error.strerror or error}") from None
        if part != path:
            if not stat.S_ISDIR(os.stat(part).st_mode):
                raise EnvironmentProblem(f"refusing {path}: {part} is not a directory")
            return
        if stat.S_ISLNK(info.st_mode):
            raise EnvironmentProblem(f"refusing {path}: it is a symlink")
        if not stat.S_ISDIR(info.st_mode):
            raise EnvironmentProblem(f"refusing {path}: not a directory")
        if info.st_uid not in (0, os.geteuid()):
            raise EnvironmentProblem(
                f"refusing {path}: owned by uid {info.st_uid}, not root or this user "
                f"({os.geteuid()})"
            )
        return


def ensure_dir(path: Path, mode: int) -> None:
    """Create `path` (and missing parents) with `mode`, or check an existing one is safe and
    give it `mode`. Raises EnvironmentProblem."""
    check_dir(path)
    if not path.exists():
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.mkdir(mode=mode)
            os.chmod(path, mode)  # mkdir follows the umask
        except OSError as error:
            raise EnvironmentProblem(f"cannot create {path}: {error.strerror or error}") from None
        return
    if stat.S_IMODE(path.lstat().st_mode) != mode:
        try:
            os.chmod(path, mode)
        except OSError as error:
            raise EnvironmentProblem(
                f"cannot set mode {mode:o} on {path}: {error.strerror or error}"
            ) from None


def prepare(run_dir: Path, private_dir: Path, state_dir: Path) -> str | None:
    """Set up the run, private and state directories. Every one is checked before any is
    created, so a refusal changes nothing. A state directory that cannot be created or
    written (read-only, full) is not fatal (the node id is then held in memory): the reason
    is returned. Raises EnvironmentProblem for unsafe or impossible directories."""
    for path in (run_dir, private_dir, state_dir):
        check_dir(path)
    ensure_dir(run_dir, 0o755)
    ensure_dir(private_dir, 0o700)
    try:
        ensure_dir(state_dir, 0o700)
    except EnvironmentProblem as problem:
        return str(problem)
    return None
