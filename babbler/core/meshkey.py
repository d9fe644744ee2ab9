"""The optional mesh key: a file of hex digits, kept secret, that babeld uses to sign and
check every packet (HMAC-SHA256, RFC 8967). Nodes without the same key are no neighbours.

Pure: what a key file must be (`check`, given what was read of it) and the line babeld gets.
The daemon reads the file (daemon/keyfile.py); `babblerctl keygen` writes one.
The key only ever goes into babeld's 0600 `-c` file: never onto a command line, into a log,
or into `status` (which says only whether the mesh is keyed).
"""

from __future__ import annotations

import stat
import string
from dataclasses import dataclass, field
from pathlib import Path

from babbler.core.errors import ConfigError

KEY_BYTES = 32  # what `babblerctl keygen` writes: as long as SHA-256's output
MIN_KEY_BYTES = 16
MAX_KEY_BYTES = 64  # HMAC-SHA256's block size: longer keys are hashed down anyway
READ_BYTES = 4 * MAX_KEY_BYTES  # enough of a file to tell a key from anything longer
KEY_ID = "babbler"  # the key's name in babeld's configuration (not secret)


@dataclass(frozen=True)
class MeshKey:
    path: Path
    value: str = field(repr=False)  # hex digits; never printed

    def babeld_lines(self) -> str:
        """The `key` line of babeld's -c file."""
        return f"key id {KEY_ID} type hmac-sha256 value {self.value}\n"


@dataclass(frozen=True)
class KeyFile:
    """What was read of a key file: its stat fields and its first READ_BYTES bytes."""

    path: Path
    mode: int  # st_mode
    uid: int  # st_uid
    raw: bytes


def where(path: Path) -> str:
    return f"key-file {path}"


def check(read: KeyFile, euid: int, private_dir: bool = False) -> MeshKey:
    """The key a file holds, or ConfigError naming the file and the problem: not a regular
    file, readable by group or others, owned by neither root nor `euid`, not hex, too short
    or too long. `private_dir`: the file is in a directory only this service can read
    (systemd's credentials: there an ACL for the service's user shows as group bits), so
    its mode and owner say nothing."""
    at = where(read.path)
    if not stat.S_ISREG(read.mode):
        raise ConfigError(f"{at}: not a regular file")
    mode = stat.S_IMODE(read.mode)
    if mode & 0o077 and not private_dir:
        raise ConfigError(f"{at}: readable by group or others (mode {mode:04o}); chmod 600 it")
    if read.uid not in (0, euid) and not private_dir:
        raise ConfigError(f"{at}: owned by uid {read.uid}, not root or this user ({euid})")
    try:
        text = read.raw.decode("ascii").strip().lower()
    except UnicodeDecodeError:
        raise ConfigError(f"{at}: not hex digits") from None
    if not text or any(c not in string.hexdigits for c in text) or len(text) % 2:
        raise ConfigError(f"{at}: not hex digits (an even number of 0-9, a-f)")
    size = len(text) // 2
    if not MIN_KEY_BYTES <= size <= MAX_KEY_BYTES:
        raise ConfigError(
            f"{at}: {size} bytes; a key has {MIN_KEY_BYTES} to {MAX_KEY_BYTES} bytes "
            f"({2 * MIN_KEY_BYTES} to {2 * MAX_KEY_BYTES} hex digits)"
        )
    return MeshKey(read.path, text)
