"""Child processes (babeld, the bench responder) as they run on macOS (no pidfd, no /proc,
no PDEATHSIG), exercised here by turning the Linux paths off."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import trio

from babbler.daemon import children, spawn
from babbler.daemon.babeld.process import clear_stale
from babbler.daemon.children import Child


@pytest.fixture(autouse=True)
def like_macos(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(children, "LINUX_HOST", False)
    monkeypatch.setattr(spawn, "LINUX_HOST", False)


async def test_exit_is_seen_by_polling() -> None:
    child = Child(spawn.spawn(["sh", "-c", "echo bye; exit 3"]))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(child.pump_output)
        with trio.fail_after(10):
            assert await child.wait() == 3
    assert child.output() == "bye"


async def test_stop_terminates_a_running_child() -> None:
    child = Child(spawn.spawn(["sleep", "30"]))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(child.pump_output)
        with trio.fail_after(10):
            assert await child.stop() == -15


def test_names_come_from_ps() -> None:
    assert spawn.process_name(os.getpid()) is not None
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        assert spawn.process_name(sleeper.pid) == "sleep"
    finally:
        sleeper.kill()
        sleeper.wait()
    assert spawn.process_name(sleeper.pid) is None


async def test_a_stale_pid_file_naming_no_babeld_is_just_removed(tmp_path: Path) -> None:
    pid_file, sock = tmp_path / "babeld.pid", tmp_path / "babeld.sock"
    pid_file.write_text(f"{os.getpid()}\n")  # alive, but not babeld: never signalled
    sock.write_text("")
    assert await clear_stale(pid_file, sock) is None
    assert not pid_file.exists() and not sock.exists()
