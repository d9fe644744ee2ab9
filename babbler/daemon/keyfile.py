"""Reading the mesh key file (`--key-file`); what it must hold is core/meshkey.py's."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from babbler.core.errors import ConfigError
from babbler.core.meshkey import READ_BYTES, KeyFile, MeshKey, check, where


def load_key(path: Path) -> MeshKey:
    """Read and check a key file, never through a symlink. Raises ConfigError naming the
    file and the problem (missing or unreadable too)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise ConfigError(
            f"{where(path)}: no such file (make one: babblerctl keygen {path})"
        ) from None
    except OSError as error:
        raise ConfigError(f"{where(path)}: {error.strerror or error}") from None
    try:
        info = os.fstat(fd)
        raw = os.read(fd, READ_BYTES) if stat.S_ISREG(info.st_mode) else b""
    finally:
        os.close(fd)
    return check(KeyFile(path, info.st_mode, info.st_uid, raw), os.geteuid())
