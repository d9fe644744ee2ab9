"""A bench responder left by an earlier babblerd (macOS: no death signal) is ended at the
next start through its record, and only while the recorded pid still runs the recorded
command: never a stranger that got the pid, never through a planted symlink (real
processes)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from babbler.daemon.responder import PID_FILE, PROGRAM, end_stale

RUNS = "import time; print('ready', flush=True); time.sleep(60)"
# A stand-in for the responder: a tiny program whose command line names it.
LEFT = [sys.executable, "-c", RUNS, PROGRAM, "--port", "6699"]
STRANGER = [sys.executable, "-c", RUNS]

Start = Callable[[list[str]], subprocess.Popen[bytes]]


@pytest.fixture
def start() -> Iterator[Start]:
    """Start a program and wait until it runs (a process just past exec has no command
    line yet); each is killed after the test."""
    started: list[subprocess.Popen[bytes]] = []

    def run(args: list[str]) -> subprocess.Popen[bytes]:
        process = subprocess.Popen(args, stdout=subprocess.PIPE)
        started.append(process)
        assert process.stdout is not None and process.stdout.readline() == b"ready\n"
        return process

    yield run
    for process in started:
        process.kill()
        process.wait()
        if process.stdout is not None:
            process.stdout.close()


def record(path: Path, pid: int, command: list[str]) -> None:
    path.write_text(json.dumps({"pid": pid, "command": command}) + "\n")


async def test_the_responder_an_earlier_babblerd_recorded_is_ended(
    tmp_path: Path, start: Start
) -> None:
    left = start(LEFT)
    record(tmp_path / PID_FILE, left.pid, LEFT)
    assert await end_stale(tmp_path) == left.pid
    assert left.wait(5) == -signal.SIGTERM
    assert not (tmp_path / PID_FILE).exists()
    assert await end_stale(tmp_path) is None  # nothing recorded: nothing to do


async def test_a_stranger_with_the_recorded_pid_is_left_alone(tmp_path: Path, start: Start) -> None:
    """The pid was reused (the responder died with its babblerd, or long ago): the process
    that has it now runs another command, and goes on running; the record goes."""
    stranger = start(STRANGER)
    record(tmp_path / PID_FILE, stranger.pid, LEFT)
    assert await end_stale(tmp_path) is None
    assert stranger.poll() is None
    assert not (tmp_path / PID_FILE).exists()


@pytest.mark.parametrize(
    "text", ['{"pid": "1", "command": ["x"]}', '{"pid": 0, "command": []}', "[1]", "garbage"]
)
async def test_a_record_that_is_not_one_ends_nothing(tmp_path: Path, text: str) -> None:
    (tmp_path / PID_FILE).write_text(text)
    assert await end_stale(tmp_path) is None
    assert not (tmp_path / PID_FILE).exists()


async def test_a_symlink_in_place_of_the_record_is_not_followed(
    tmp_path: Path, start: Start
) -> None:
    left = start(LEFT)
    planted = tmp_path / "planted"
    record(planted, left.pid, LEFT)
    os.symlink(planted, tmp_path / PID_FILE)
    assert await end_stale(tmp_path) is None
    assert left.poll() is None
    assert not (tmp_path / PID_FILE).exists() and planted.exists()
