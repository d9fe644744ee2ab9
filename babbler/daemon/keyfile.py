"""Reading the mesh key file (`--key-file`, else systemd's credential `mesh.key`); what it
must hold is core/meshkey.py's."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from babbler.core.errors import ConfigError
from babbler.core.meshkey import READ_BYTES, KeyFile, MeshKey, check, where

CREDENTIAL = "mesh.key"  # systemd: LoadCredential=mesh.key:/etc/babbler/mesh.key


def credential() -> Path | None:
    """The mesh key systemd passed as a credential (the key file stays root's, 0600), if
    any: `$CREDENTIALS_DIRECTORY/mesh.key`."""
    directory = os.environ.get("CREDENTIALS_DIRECTORY")
    path = Path(directory) / CREDENTIAL if directory else None
    return path if path is not None and path.exists() else None


def mesh_key(key_file: Path | None) -> MeshKey | None:
    """The mesh key: `--key-file`, else systemd's credential, else none."""
    if key_file is not None:
        return load_key(key_file)
    passed = credential()
    return load_key(passed, private_dir=True) if passed is not None else None


def load_key(path: Path, private_dir: bool = False) -> MeshKey:
    """Read and check a key file, never through a symlink. Raises ConfigError naming the
    file and the problem (missing or unreadable too). `private_dir`: a credential."""
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
    return check(KeyFile(path, info.st_mode, info.st_uid, raw), os.geteuid(), private_dir)
