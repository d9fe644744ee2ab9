"""A file replaced whole or not at all (host/whole.py): what babblerd's state files,
babblerctl's outputs, the service's files and the lab's records are written with."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from babbler.host import whole
from babbler.host.whole import replace_whole


def _left(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


@given(st.binary(max_size=4096), st.sampled_from([0o600, 0o644]))
def test_what_is_written_is_read_back_with_its_mode(data: bytes, mode: int) -> None:
    with tempfile.TemporaryDirectory() as name:
        path = Path(name) / "state"
        path.write_bytes(b"old")
        old_umask = os.umask(0o077)  # mkstemp's 0600 and any umask: the mode asked is kept
        try:
            replace_whole(path, data, mode)
        finally:
            os.umask(old_umask)
        assert path.read_bytes() == data
        assert stat.S_IMODE(path.stat().st_mode) == mode
        assert _left(Path(name)) == ["state"]


def test_a_symlink_there_is_replaced_never_followed(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("not yours")
    link = tmp_path / "hosts.json"
    link.symlink_to(target)
    replace_whole(link, b"[]", 0o644)
    assert not link.is_symlink() and link.read_bytes() == b"[]"
    assert target.read_text() == "not yours"


@pytest.mark.parametrize("stop", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_a_failure_or_ctrl_c_keeps_the_old_file_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stop: BaseException
) -> None:
    path = tmp_path / "metrics.prom"
    path.write_text("old")

    def fails(fd: int) -> None:
        raise stop

    monkeypatch.setattr(os, "fsync", fails)
    with pytest.raises(type(stop)):
        replace_whole(path, b"new", 0o644)
    assert path.read_text() == "old"
    assert _left(tmp_path) == ["metrics.prom"]


def test_the_temporary_file_is_never_one_a_reader_of_the_directory_takes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """node_exporter's textfile collector reads every *.prom: the temporary file, seen
    while it is written, is not one."""
    seen: list[str] = []
    real = os.replace

    def look(src: str, dst: Path) -> None:
        seen.append(Path(src).name)
        real(src, dst)

    monkeypatch.setattr(os, "replace", look)
    replace_whole(tmp_path / "babbler.prom", b"x 1\n", 0o644)
    assert len(seen) == 1 and seen[0].startswith(".babbler.prom.")
    assert seen[0].endswith(whole.PARTIAL) and not seen[0].endswith(".prom")
