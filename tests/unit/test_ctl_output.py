"""babblerctl as a user meets it, against a fake babblerd (tests/fakes/babblerd_socket.py):
what each command prints, and its one-line errors."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from babbler.core.errors import BabblerError
from babbler.ctl.main import main as babblerctl
from babbler.ui.command import write_whole
from tests.fakes.babblerd_socket import fake_babblerd
from tests.unit.samples import typed
from tests.unit.test_hostfile import mesh_status

__all__ = ["fake_babblerd"]  # the fixture, used by name below


def test_hostfile_to_a_missing_directory_is_one_line_and_leaves_nothing(
    fake_babblerd: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    path, served = fake_babblerd
    served["status"] = typed(mesh_status(2, [(0, 1)])).raw
    out = tmp_path / "out"  # the fake's socket is in tmp_path
    out.mkdir()
    (out / "file").write_text("")
    cases = {
        out / "absent" / "x.json": f"no such directory {out / 'absent'} (make it first)",
        out / "file" / "x.json": f"{out / 'file'} is not a directory",
    }
    for target, why in cases.items():
        args = ["--socket", str(path), "hostfile", "--format", "mlx", "-o", str(target)]
        done = CliRunner().invoke(babblerctl, args)
        assert done.exit_code == 1, done.output
        assert done.output == f"babblerctl: cannot write {target}: {why}\n", done.output
        assert sorted(out.rglob("*")) == [out / "file"]  # nothing left behind
    written = out / "hosts.json"
    args = ["--socket", str(path), "hostfile", "--format", "mlx", "-o", str(written)]
    assert CliRunner().invoke(babblerctl, args).exit_code == 0
    assert written.read_text().startswith("[")
    assert sorted(out.iterdir()) == [out / "file", written]


def test_a_file_is_replaced_whole_readable_by_all_and_nothing_left(tmp_path: Path) -> None:
    target = tmp_path / "babbler.prom"
    target.write_text("old\n")
    before = target.stat().st_ino
    old = os.umask(0o077)
    try:
        write_whole(b"new\n", target)
    finally:
        os.umask(old)
    assert target.read_bytes() == b"new\n" and target.stat().st_ino != before  # renamed over
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert os.listdir(tmp_path) == ["babbler.prom"]


def test_an_unwritable_place_is_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    why = "no such directory /nonexist (make it first)"
    with pytest.raises(BabblerError, match=rf"^cannot write /nonexist/x.prom: {re.escape(why)}$"):
        write_whole("x", Path("/nonexist/x.prom"))
    target = tmp_path / "hosts.json"
    target.mkdir()  # the rename over it fails after the temporary file was written
    with pytest.raises(BabblerError, match=f"^cannot write {target}: it is a directory$"):
        write_whole("[]\n", target)
    assert list(tmp_path.iterdir()) == [target]


def test_a_link_planted_where_the_file_is_written_first_is_not_followed(tmp_path: Path) -> None:
    """In a shared directory, whoever can make a file there must not turn the write (as root)
    into one of a file of their choosing: the old fixed .NAME.partial was opened through a
    symbolic link put there, and the link then renamed over the target."""
    elsewhere = tmp_path / "passwd"
    elsewhere.write_text("root:x:0:0\n")
    target = tmp_path / "hosts.json"
    planted = tmp_path / ".hosts.json.partial"
    planted.symlink_to(elsewhere)
    write_whole("[]\n", target)
    assert elsewhere.read_text() == "root:x:0:0\n"
    assert not target.is_symlink() and target.read_text() == "[]\n"
    assert planted.is_symlink()  # someone else's: left as it was
    assert sorted(tmp_path.iterdir()) == [planted, target, elsewhere]
