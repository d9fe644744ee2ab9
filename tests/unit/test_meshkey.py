"""The mesh key file's rules (core/meshkey.py), without root: every refusal names the file
and the problem, and a good key is read as lowercase hex."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from babbler.core.errors import ConfigError
from babbler.core.meshkey import KeyFile, check
from babbler.daemon.keyfile import load_key, mesh_key

REGULAR_0600 = stat.S_IFREG | 0o600
GOOD = b"00112233445566778899aabbccddeeff" * 2 + b"\n"  # 32 bytes
PATH = Path("/etc/babbler/mesh.key")


def read(raw: bytes = GOOD, mode: int = REGULAR_0600, uid: int = 0) -> KeyFile:
    return KeyFile(PATH, mode, uid, raw)


@pytest.mark.parametrize(
    ("keyfile", "problem"),
    [
        (read(mode=stat.S_IFDIR | 0o700), "not a regular file"),
        (read(mode=REGULAR_0600 | 0o040), r"readable by group or others \(mode 0640\); chmod 600"),
        (read(mode=REGULAR_0600 | 0o004), r"readable by group or others \(mode 0604\)"),
        (read(uid=1234), r"owned by uid 1234, not root or this user \(1000\)"),
        (read(raw=b"\xff\xfe"), "not hex digits"),
        (read(raw=b"xyz0"), r"not hex digits \(an even number of 0-9, a-f\)"),
        (read(raw=b"abc"), "not hex digits"),
        (read(raw=b""), "not hex digits"),
        (read(raw=b"ab" * 15), "15 bytes; a key has 16 to 64 bytes"),
        (read(raw=b"ab" * 65), "65 bytes; a key has 16 to 64 bytes"),
    ],
)
def test_a_bad_key_file_is_refused_with_its_name_and_problem(
    keyfile: KeyFile, problem: str
) -> None:
    with pytest.raises(ConfigError, match=rf"^key-file {PATH}: {problem}"):
        check(keyfile, euid=1000)


def test_a_good_key_is_lowercase_hex_owned_by_root_or_this_user() -> None:
    for uid in (0, 1000):
        key = check(read(raw=GOOD.upper(), uid=uid), euid=1000)
        assert key.value == GOOD.decode().strip()
    assert "0011" not in repr(key)  # never printed
    assert key.babeld_lines() == f"key id babbler type hmac-sha256 value {key.value}\n"


def test_reading_refuses_a_missing_file_and_a_symlink(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file \\(make one: babblerctl keygen"):
        load_key(tmp_path / "missing")
    real = tmp_path / "real.key"
    real.write_bytes(GOOD)
    real.chmod(0o600)
    assert load_key(real).value == GOOD.decode().strip()
    link = tmp_path / "link.key"
    link.symlink_to(real)
    with pytest.raises(ConfigError, match=f"^key-file {link}: "):
        load_key(link)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o600)
    with pytest.raises(ConfigError, match="not a regular file"):
        load_key_nonblocking(fifo)


def load_key_nonblocking(path: Path) -> object:
    """A FIFO with no writer would block open(); a writer end opened first lets the check
    run (it must refuse without reading)."""
    writer = os.open(path, os.O_RDWR | os.O_NONBLOCK)
    try:
        return load_key(path)
    finally:
        os.close(writer)


def test_systemds_credential_is_the_key_when_no_key_file_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LoadCredential=mesh.key:/etc/babbler/mesh.key: the file stays root's 0600; the copy
    systemd gives the service may show group bits (an ACL for the service's user)."""
    monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)
    assert mesh_key(None) is None
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(tmp_path))
    assert mesh_key(None) is None  # no such credential: no key
    passed = tmp_path / "mesh.key"
    passed.write_bytes(GOOD)
    passed.chmod(0o440)
    key = mesh_key(None)
    assert key is not None and key.value == GOOD.decode().strip()
    with pytest.raises(ConfigError, match="readable by group"):
        load_key(passed)  # the same file given as --key-file: checked as a file
    own = tmp_path / "own.key"
    own.write_bytes(b"ab" * 32 + b"\n")
    own.chmod(0o600)
    chosen = mesh_key(own)
    assert chosen is not None and chosen.value == "ab" * 32  # --key-file wins
