"""The lab's files, kept where no one else can redirect them.

babbler-lab runs as root. Each directory it uses is checked with every directory above it:
a real directory (not a symlink), owned by root or the user running the lab, writable by no
one else (a sticky directory such as /tmp above it aside: there no one else may move or
replace an entry of ours). Files are created without following a link (`lab.json` under a
fresh name, then renamed over), logs are opened without following one and checked to be a
plain file of ours, and small files are read without following one. Raises LabError.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from babbler.host.whole import replace_whole
from babbler.lab.topology import LabError

# Traversable by everyone: unprivileged users reach the nodes' sockets under it, and read
# `lab.json` (`babbler-lab status` needs no root). Writable by its owner alone.
DIR_MODE = 0o755
# The daemons' logs and lab.json: readable by users, as `babbler-lab status` and `babblerctl`
# output are; nothing in them is secret (the mesh key stays in its own file).
FILE_MODE = 0o644
WRITABLE_BY_OTHERS = stat.S_IWGRP | stat.S_IWOTH


def _owners() -> tuple[int, int]:
    return (0, os.geteuid())


def _refuse(path: Path, part: Path, why: str) -> LabError:
    where = "it" if part == path else str(part)
    return LabError(
        f"refusing {path}: {where} {why}, so someone else could redirect the lab's files; "
        f"remove it or fix its owner and mode"
    )


def check_dir(path: Path) -> None:
    """Refuse `path` unless it and every directory above it are safe (see the module).
    Raises LabError, or FileNotFoundError when a part of it does not exist."""
    for part in (path, *path.parents):
        info = os.lstat(part)
        if stat.S_ISLNK(info.st_mode):
            raise _refuse(path, part, "is a symlink")
        if not stat.S_ISDIR(info.st_mode):
            raise _refuse(path, part, "is not a directory")
        if info.st_uid not in _owners():
            raise _refuse(path, part, f"is owned by uid {info.st_uid}, not root")
        sticky = part != path and info.st_mode & stat.S_ISVTX
        if info.st_mode & WRITABLE_BY_OTHERS and not sticky:
            raise _refuse(path, part, f"is writable by others (mode {info.st_mode & 0o7777:o})")


def make_dir(path: Path) -> Path:
    """`path` as a directory of ours: created (DIR_MODE) if missing, checked either way.
    Its parent must exist. Raises LabError."""
    check_dir(path.parent)  # before mkdir: a symlinked parent would take it elsewhere
    try:
        os.mkdir(path, DIR_MODE)
        os.chmod(path, DIR_MODE)  # mkdir follows the umask
    except FileExistsError:
        pass  # someone's: checked below
    except OSError as error:
        raise LabError(f"cannot create {path}: {error.strerror or error}") from None
    check_dir(path)
    return path


def _plain_file_of_ours(path: Path, fd: int, owned: bool = True) -> None:
    """Refuse an opened file that is not a plain file with one name (a hard link to another
    file would pass every other check), owned by us unless `owned` is False."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise LabError(f"refusing {path}: not a plain file; remove it")
    if info.st_nlink != 1:
        raise LabError(f"refusing {path}: it has {info.st_nlink} names (a hard link); remove it")
    if owned and info.st_uid not in _owners():
        raise LabError(f"refusing {path}: owned by uid {info.st_uid}, not root; remove it")


def _open(path: Path, flags: int, mode: int = FILE_MODE) -> int:
    """os.open without following a final symlink, and without blocking on a FIFO."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    except OSError as error:
        if error.errno == errno.ELOOP:  # O_NOFOLLOW met a symlink
            raise LabError(f"refusing {path}: it is a symlink; remove it") from None
        raise


def open_log(path: Path) -> int:
    """A daemon's log, opened to append (created if missing); its descriptor, which the
    caller closes. Raises LabError for anything but a plain file of ours."""
    fd = _open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        _plain_file_of_ours(path, fd)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_file(path: Path, text: str) -> None:
    """Write `path` whole (host/whole.py: a fresh file renamed over the old one, which
    replaces a symlink there instead of following it). Raises OSError."""
    replace_whole(path, text.encode(), FILE_MODE)


def read_file(path: Path, limit: int, owned: bool = True) -> bytes:
    """A small file's bytes, read without following a symlink. Raises LabError for
    anything but a plain file (of ours, unless `owned` is False) of at most `limit` bytes,
    FileNotFoundError when it is missing."""
    fd = _open(path, os.O_RDONLY)
    with os.fdopen(fd, "rb") as source:
        _plain_file_of_ours(path, fd, owned)
        data = source.read(limit + 1)
    if len(data) > limit:
        raise LabError(f"refusing {path}: larger than {limit} bytes; remove it")
    return data
