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


NOBODY = 65534
SWAPPABLE = "could be swapped; use a directory under root-owned ones"
needs_root = pytest.mark.integration  # chown: only root gives a directory to another user


def refusal(run: Path) -> str:
    with pytest.raises(EnvironmentProblem) as refused:
        paths.prepare(run, run / "private", run.parent / "state")
    return str(refused.value)


@needs_root
def test_a_run_dir_under_another_users_directory_is_refused(tmp_path: Path) -> None:
    """The issue's attack: `--run-dir` under a directory of nobody's was taken, and nobody
    then swapped the run dir for their own, with a fake public socket in it."""
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.chown(theirs, NOBODY, NOBODY)
    for run in (theirs / "run", theirs / "deeper" / "run"):
        assert refusal(run) == f"refusing {run}: {theirs} is owned by uid {NOBODY} and {SWAPPABLE}"
    (theirs / "run").mkdir()  # root's own, left by an earlier start: nobody can still rename it
    assert refusal(theirs / "run").endswith(f"{theirs} is owned by uid {NOBODY} and {SWAPPABLE}")
    assert sorted(os.listdir(theirs)) == ["run"]  # nothing created


@needs_root
def test_a_directory_others_may_write_to_above_the_run_dir_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    run = shared / "babbler" / "run"
    assert refusal(run) == f"refusing {run}: {shared} is writable by others and {SWAPPABLE}"
    shared.chmod(0o775)
    os.chown(shared, 0, NOBODY)
    assert refusal(run).endswith(f"{shared} is writable by group {NOBODY} and {SWAPPABLE}")
    os.chown(shared, 0, 0)  # root's own group: root alone
    assert paths.prepare(run, run / "private", shared / "state") is None
    assert not list(tmp_path.glob("**/private/*"))


@needs_root
def test_a_sticky_directory_is_safe_only_for_entries_of_ours(tmp_path: Path) -> None:
    """/tmp: everyone may create entries, but only an entry's owner may rename or remove it.
    A symlink of nobody's there is theirs to point elsewhere at any time."""
    sticky = tmp_path / "tmp"
    sticky.mkdir()
    sticky.chmod(0o1777)
    run = sticky / "babbler" / "run"
    assert paths.prepare(run, run / "private", sticky / "babbler" / "state") is None
    assert paths.prepare(run, run / "private", sticky / "babbler" / "state") is None  # again
    real = tmp_path / "real"
    real.mkdir()
    link = sticky / "link"
    link.symlink_to(real)
    os.lchown(link, NOBODY, NOBODY)
    message = refusal(link / "run")
    assert message == (
        f"refusing {link / 'run'}: {link} is owned by uid {NOBODY} in the shared {sticky} "
        f"and could be swapped; remove it or use a directory under root-owned ones"
    )
    os.lchown(link, 0, 0)
    assert paths.prepare(link / "run", link / "run" / "private", real / "state") is None


@needs_root
def test_macos_layout_var_is_a_symlink_and_var_run_is_root_daemon_0775(tmp_path: Path) -> None:
    """A fake of the Mac's default run dir: /var -> private/var, /private/var/run owned by
    root, group daemon (1), group-writable. Accepted, and what it resolves to is what counts:
    the same layout with private/var/run given to nobody is refused, naming that directory."""
    var_run = tmp_path / "private" / "var" / "run"
    var_run.mkdir(parents=True)
    os.chown(var_run, 0, 1)
    var_run.chmod(0o775)
    (tmp_path / "var").symlink_to("private/var")
    run = tmp_path / "var" / "run" / "babbler"
    assert paths.prepare(run, run / "private", tmp_path / "var" / "db" / "babbler") is None
    assert mode(var_run / "babbler") == 0o755
    os.chown(var_run, NOBODY, 1)
    assert refusal(run) == f"refusing {run}: {var_run} is owned by uid {NOBODY} and {SWAPPABLE}"


def test_a_run_dir_others_may_write_to_is_refused_not_quietly_fixed(tmp_path: Path) -> None:
    """Someone may have put things in it already: the daemon says so instead of chmod-ing."""
    run = tmp_path / "run"
    run.mkdir()
    run.chmod(0o777)
    assert refusal(run) == (
        f"refusing {run}: it is writable by others (mode 777); remove it or chmod go-w it"
    )
    assert mode(run) == 0o777


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
