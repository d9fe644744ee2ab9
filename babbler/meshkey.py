"""The optional mesh key: a file of hex digits, kept secret, that babeld uses to sign and
check every packet (HMAC-SHA256, RFC 8967). Nodes without the same key are no neighbours.

The key only ever goes into babeld's 0600 `-c` file: never onto a command line, into a log,
or into `status` (which says only whether the mesh is keyed).
"""

from __future__ import annotations

import os
import stat
import string
from dataclasses import dataclass, field
from pathlib import Path

from babbler.errors import ConfigError

KEY_BYTES = 32  # what `babblerctl keygen` writes: as long as SHA-256's output
MIN_KEY_BYTES = 16
MAX_KEY_BYTES = 64  # HMAC-SHA256's block size: longer keys are hashed down anyway
KEY_ID = "babbler"  # the key's name in babeld's configuration (not secret)


@dataclass(frozen=True)
class MeshKey:
    path: Path
    value: str = field(repr=False)  # hex digits; never printed

    def babeld_lines(self) -> str:
        """The `key` line of babeld's -c file."""
        return f"key id {KEY_ID} type hmac-sha256 value {self.value}\n"


def load_key(path: Path) -> MeshKey:
    """Read and check a key file. Raises ConfigError naming the file and the problem: missing,
    not a regular file, readable by group or others, owned by someone else, not hex, too
    short or too long."""
    where = f"key-file {path}"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise ConfigError(f"{where}: no such file (make one: babblerctl keygen {path})") from None
    except OSError as error:
        raise ConfigError(f"{where}: {error.strerror or error}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"{where}: not a regular file")
        mode = stat.S_IMODE(info.st_mode)
        if mode & 0o077:
            raise ConfigError(
                f"{where}: readable by group or others (mode {mode:04o}); chmod 600 it"
            )
        if info.st_uid not in (0, os.geteuid()):
            raise ConfigError(
                f"{where}: owned by uid {info.st_uid}, not root or this user ({os.geteuid()})"
            )
        raw = os.read(fd, 4 * MAX_KEY_BYTES)
    finally:
        os.close(fd)
    try:
        text = raw.decode("ascii").strip().lower()
    except UnicodeDecodeError:
        raise ConfigError(f"{where}: not hex digits") from None
    if not text or any(c not in string.hexdigits for c in text) or len(text) % 2:
        raise ConfigError(f"{where}: not hex digits (an even number of 0-9, a-f)")
    size = len(text) // 2
    if not MIN_KEY_BYTES <= size <= MAX_KEY_BYTES:
        raise ConfigError(
            f"{where}: {size} bytes; a key has {MIN_KEY_BYTES} to {MAX_KEY_BYTES} bytes "
            f"({2 * MIN_KEY_BYTES} to {2 * MAX_KEY_BYTES} hex digits)"
        )
    return MeshKey(path, text)


def write_new_key(path: Path) -> None:
    """Write a new random key to `path` (created 0600; an existing file is never replaced).
    Raises OSError (FileExistsError when it exists)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, f"{os.urandom(KEY_BYTES).hex()}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)
