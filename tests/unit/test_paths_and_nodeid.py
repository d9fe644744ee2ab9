from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from babbler.core.errors import EnvironmentProblem
from babbler.daemon import paths
from babbler.daemon.nodeid import load_node_id


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_directories_are_created_with_their_modes(tmp_path: Path) -> None:
    run, state = tmp_path / "run", tmp_path / "deep" / "state"
    assert paths.prepare(run, run / "private", state) is None
    assert (mode(run), mode(run / "private"), mode(state)) == (0o755, 0o700, 0o700)


def test_symlinked_directories_are_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(EnvironmentProblem, match=f"refusing {link}: it is a symlink"):
        paths.prepare(link, link / "private", tmp_path / "state")
    with pytest.raises(EnvironmentProblem, match="it is a symlink"):
        paths.prepare(tmp_path / "run", tmp_path / "run" / "private", link)


@pytest.mark.integration  # needs root: only root's directories must be root-owned
def test_directories_owned_by_someone_else_are_refused(tmp_path: Path) -> None:
    foreign = tmp_path / "run"
    foreign.mkdir()
    os.chown(foreign, 65534, 65534)
    with pytest.raises(EnvironmentProblem, match=f"refusing {foreign}: owned by uid 65534"):
        paths.prepare(foreign, foreign / "private", tmp_path / "state")


def test_node_id_is_generated_once_then_read_back(tmp_path: Path) -> None:
    first = load_node_id(tmp_path, None)
    assert first.source == "generated" and first.persist_error is None
    text = (tmp_path / "node-id").read_text()
    assert text == f"{first.value:012x}\n" and mode(tmp_path / "node-id") == 0o600
    again = load_node_id(tmp_path, None)
    assert (again.value, again.source) == (first.value, "file")
    assert load_node_id(tmp_path, 0x42).value == 0x42


def test_unwritable_state_dir_keeps_the_id_in_memory_and_says_why(tmp_path: Path) -> None:
    missing = tmp_path / "absent" / "state"
    node = load_node_id(missing, None)
    assert node.source == "generated"
    assert node.persist_error is not None and str(missing / "node-id") in node.persist_error


def test_corrupt_id_file_is_replaced(tmp_path: Path) -> None:
    (tmp_path / "node-id").write_text("not an id\n")
    node = load_node_id(tmp_path, None)
    assert node.source == "generated"
    assert (tmp_path / "node-id").read_text() == f"{node.value:012x}\n"


def test_the_all_zero_node_id_is_refused_by_flag_and_file(tmp_path: Path) -> None:
    from babbler.core.addressing import parse_node_id

    with pytest.raises(ValueError, match="subnet-router anycast address"):
        parse_node_id("000000000000")
    (tmp_path / "node-id").write_text("000000000000\n")
    with pytest.raises(EnvironmentProblem, match="delete the file for a new random id"):
        load_node_id(tmp_path, None)
    assert (tmp_path / "node-id").read_text() == "000000000000\n"  # not replaced behind you
