"""`babblerctl keygen`: a new random mesh key file (core/meshkey.py says what it holds)."""

from __future__ import annotations

import os
from pathlib import Path

from babbler.core.meshkey import KEY_BYTES


def write_new_key(path: Path) -> None:
    """Write a new random key to `path` (created 0600; an existing file is never replaced).
    Raises OSError (FileExistsError when it exists)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, f"{os.urandom(KEY_BYTES).hex()}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)
