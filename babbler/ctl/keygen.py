"""`babblerctl keygen`: a new random mesh key file (core/meshkey.py says what it holds)."""

from __future__ import annotations

import os
from pathlib import Path

from babbler.core.meshkey import KEY_BYTES


def new_key() -> str:
    """A new random key, as a key file holds it (one line)."""
    return f"{os.urandom(KEY_BYTES).hex()}\n"


def write_new_key(path: Path) -> bool:
    """Write a new random key to `path` (created 0600; an existing file is never replaced),
    creating its directory (0755) when missing, as /etc/babbler is on a fresh install.
    Returns whether the directory was made. Raises OSError (FileExistsError when it
    exists)."""
    made = not path.parent.exists()
    if made:
        path.parent.mkdir(mode=0o755, parents=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, new_key().encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    return made
