"""A file replaced whole or not at all: what babblerd's state files, babblerctl's outputs
(a hostfile a job reads, a metrics file node_exporter reads), the service's installed files
and the lab's records are all written with. A reader sees the old file or the new one, never
half of one; a crash or a failure leaves no temporary file behind."""

from __future__ import annotations

import os
from pathlib import Path

# The temporary file's name ends so: never `*.prom` (node_exporter's textfile collector reads
# every such file in its directory) nor anything else a reader of the directory takes.
PARTIAL = ".partial"


def replace_whole(path: Path, data: bytes, mode: int) -> None:
    """Replace `path` with `data`, given `mode` whatever the umask. A fresh file beside it
    (mkstemp's: O_CREAT|O_EXCL|O_NOFOLLOW under an unguessable name, never one someone put
    there), flushed to disk and renamed over `path` (a symlink there is replaced, never
    followed); the directory synced after. Raises OSError; the temporary file never stays,
    also when interrupted (Ctrl-C)."""
    # Here, not at the top: tempfile brings shutil and random, ~4.7 ms of imports that the
    # early start (daemon/early.py, through nodeid) would pay before babeld's exec.
    import tempfile

    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=PARTIAL)
    temporary = Path(name)
    try:
        with os.fdopen(fd, "wb") as file:
            os.fchmod(file.fileno(), mode)  # mkstemp's is 0600
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    _sync_directory(path.parent)


def _sync_directory(directory: Path) -> None:
    """The rename made durable; a file system that cannot sync a directory is left be."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
