"""babblerctl as a user meets it, against a fake babblerd (tests/fakes/babblerd_socket.py):
what each command prints, and its one-line errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from click.testing import CliRunner

from babbler.ctl.main import main as babblerctl
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


def test_a_hostfile_that_cannot_replace_its_target_leaves_no_partial_file(tmp_path: Path) -> None:
    import pytest

    from babbler.core.errors import BabblerError
    from babbler.ui.command import write_whole

    target = tmp_path / "hosts.json"
    target.mkdir()  # the rename over it fails after the partial file was written
    with pytest.raises(BabblerError, match=f"^cannot write {target}: it is a directory$"):
        write_whole("[]\n", target)
    assert list(tmp_path.iterdir()) == [target]
