"""The daemon's directories: created with the right modes, refused when unsafe.

Whoever can rename or replace a directory on the way to ours can swap ours for their own
(and a fake public socket in it), or redirect what the daemon writes. So the path is walked
from / as the kernel resolves it, and every directory it passes through must belong to root
or the user the daemon runs as and be writable by no one else. Symlinks on the way are
followed (macOS's /var is one), their targets held to the same rule; a sticky directory
writable by everyone (/tmp) is safe when the entry we pass through in it is ours, since
there only an entry's owner may rename or remove it. The directory itself must be a real
directory (not a symlink) of ours, writable by no one else. The parts that do not exist yet
are created by the daemon and the whole path checked again.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from babbler.core.errors import EnvironmentProblem

# Groups that may write to a directory on the way: root's (root, wheel) and gid 1 (daemon on
# Debian and macOS, bin on Red Hat), system groups no login user is in. macOS's
# /private/var/run, above the default run dir, is root:daemon and group-writable.
TRUSTED_GROUPS = frozenset({0, 1})
# Symlinks followed on the way before the path counts as a loop (Linux's own MAXSYMLINKS).
MAX_SYMLINKS = 40
# Directories created on the way to ours: traversable by everyone (the public socket is
# under them), writable by root alone whatever the umask.
PARENT_MODE = 0o755
WHAT_TO_DO = "use a directory under root-owned ones"


def _owners() -> tuple[int, int]:
    return (0, os.geteuid())


def _writers(info: os.stat_result) -> str | None:
    """Who else may write to a directory: 'others', 'group N', or None."""
    if info.st_mode & stat.S_IWOTH:
        return "others"
    if info.st_mode & stat.S_IWGRP and info.st_gid not in TRUSTED_GROUPS:
        return f"group {info.st_gid}"
    return None


def _unsafe_on_the_way(
    directory: Path, info: os.stat_result, entry: Path, entry_info: os.stat_result | None
) -> str | None:
    """Why someone else could swap `entry` (None: missing, the daemon creates it) in
    `directory`, or None."""
    if info.st_uid not in _owners():
        return f"{directory} is owned by uid {info.st_uid} and could be swapped; {WHAT_TO_DO}"
    writers = _writers(info)
    if writers is None:
        return None
    if info.st_mode & stat.S_ISVTX:
        if entry_info is None or entry_info.st_uid in _owners():
            return None
        return (
            f"{entry} is owned by uid {entry_info.st_uid} in the shared {directory} and could "
            f"be swapped; remove it or {WHAT_TO_DO}"
        )
    return f"{directory} is writable by {writers} and could be swapped; {WHAT_TO_DO}"


def _unsafe_itself(path: Path, info: os.stat_result) -> str | None:
    if info.st_uid not in _owners():
        return f"owned by uid {info.st_uid}, not root or this user ({os.geteuid()})"
    writers = _writers(info)
    if writers is not None:
        mode = stat.S_IMODE(info.st_mode)
        return f"it is writable by {writers} (mode {mode:o}); remove it or chmod go-w it"
    return None


def _problem(path: Path) -> str | None:
    """Why `path` cannot be our directory (see the module), or None. Walks it from / as the
    kernel resolves it, up to the first part that does not exist. Raises OSError."""
    named = path.absolute()
    todo = list(named.parts[1:])
    here = Path("/")
    here_info = os.lstat(here)
    followed = 0
    while todo:
        name = todo.pop(0)
        if name == "..":
            here = here.parent
            here_info = os.lstat(here)
            continue
        entry = here / name
        try:
            info: os.stat_result | None = os.lstat(entry)
        except FileNotFoundError:
            info = None
        problem = _unsafe_on_the_way(here, here_info, entry, info)
        if problem is not None or info is None:
            return problem
        if stat.S_ISLNK(info.st_mode):
            if not todo:  # the directory itself
                return "it is a symlink" if entry == named else f"{entry} is a symlink"
            followed += 1
            if followed > MAX_SYMLINKS:
                return f"more than {MAX_SYMLINKS} symlinks on the way (a loop?)"
            target = Path(os.readlink(entry))
            if target.is_absolute():
                here, here_info = Path("/"), os.lstat("/")
            todo[:0] = target.parts[1:] if target.is_absolute() else target.parts
            continue
        if not stat.S_ISDIR(info.st_mode):
            return "not a directory" if entry == named else f"{entry} is not a directory"
        here, here_info = entry, info
    return _unsafe_itself(path, here_info)


def check_dir(path: Path) -> None:
    """Refuse `path` unless it, and every directory on the way to it, is safe (see the
    module). Creates nothing. Raises EnvironmentProblem."""
    try:
        problem = _problem(path)
    except OSError as error:
        raise EnvironmentProblem(f"refusing {path}: {error.strerror or error}") from None
    if problem is not None:
        raise EnvironmentProblem(f"refusing {path}: {problem}")


def _make(path: Path, mode: int) -> None:
    """Create `path` with `mode`, and its missing parents with PARENT_MODE."""
    missing = [part for part in (path, *path.parents) if not os.path.lexists(part)]
    for part in reversed(missing):
        os.mkdir(part, mode if part == path else PARENT_MODE)
        os.chmod(part, mode if part == path else PARENT_MODE)  # mkdir follows the umask


def ensure_dir(path: Path, mode: int) -> None:
    """Create `path` (and missing parents) with `mode`, or check an existing one is safe and
    give it `mode`. What it creates is checked again: someone may have made a part first.
    Raises EnvironmentProblem."""
    check_dir(path)
    if not path.exists():
        try:
            _make(path, mode)
        except OSError as error:
            raise EnvironmentProblem(f"cannot create {path}: {error.strerror or error}") from None
        check_dir(path)
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
