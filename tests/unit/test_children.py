"""Children kept running: one that exits is started again with back-off, and cancelling
stops the running one (real processes)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import trio
import trio.testing

from babbler.core.backoff import Backoff
from babbler.daemon.children import Failed, keep_running, with_backoff
from babbler.daemon.spawn import process_name, spawn


async def test_a_child_that_exits_is_started_again_with_back_off(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    starts = 0

    def start() -> subprocess.Popen[bytes]:
        nonlocal starts
        starts += 1
        return spawn(["sh", "-c", f"echo run >> {runs}; exit 3"])

    backoff = Backoff(first=0.05, cap=0.2)
    with trio.move_on_after(1.5):
        await keep_running(start, "test child", backoff)
    # 0.05 + 0.1 + 0.2 + 0.2 ... within 1.5 s: at least 4 starts, far fewer than without pauses
    assert 4 <= starts <= 12, starts
    assert runs.read_text().count("run") in (starts - 1, starts)


async def test_cancelling_stops_the_running_child(tmp_path: Path) -> None:
    pids: list[int] = []

    def start() -> subprocess.Popen[bytes]:
        popen = spawn(["sleep", "60"])
        pids.append(popen.pid)
        return popen

    with trio.move_on_after(0.5):
        await keep_running(start, "test child", Backoff(first=1.0, cap=1.0))
    assert len(pids) == 1
    with trio.fail_after(5):
        while process_name(pids[0]) is not None:
            await trio.sleep(0.02)


def test_a_stable_run_resets_the_back_off() -> None:
    backoff = Backoff(first=0.1, cap=30.0, stable=5.0)
    assert [backoff.delay() for _ in range(4)] == [0.1, 0.2, 0.4, 0.8]
    backoff.ran(4.9)
    assert backoff.delay() == 1.6
    backoff.ran(5.0)
    assert backoff.delay() == 0.1
    assert [Backoff(1.0, 3.0).delay() for _ in range(1)] == [1.0]
    capped = Backoff(1.0, 3.0)
    assert [capped.delay() for _ in range(4)] == [1.0, 2.0, 3.0, 3.0]


async def test_a_child_ended_by_sigterm_from_outside_is_no_warning(tmp_path: Path) -> None:
    """Under systemd a stop signals the whole service group: the child may go first."""
    import structlog.testing

    def start() -> subprocess.Popen[bytes]:
        return spawn(["sh", "-c", "kill -TERM $$"])

    with structlog.testing.capture_logs() as logs, trio.move_on_after(0.3):
        await keep_running(start, "test child", Backoff(first=1.0, cap=1.0))
    ended = [e for e in logs if e["event"].startswith("test child killed")]
    assert ended and ended[0]["event"] == "test child killed by SIGTERM", logs
    assert ended[0]["log_level"] == "info"


async def test_the_restart_loop_pauses_only_after_a_failed_run(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """`with_backoff`, the loop `keep_running` and the mesh supervisor share: a run that ended
    without failing starts again at once; a failed one is said with its pause, which doubles
    unless the run lasted `stable` seconds."""
    said: list[float] = []
    ends = [None, Failed(0.0, said.append), None, Failed(9.0, said.append)]
    ends.append(Failed(1.0, said.append))
    starts: list[float] = []

    async def run() -> Failed | None:
        starts.append(trio.current_time())
        if not ends:
            await trio.sleep_forever()
        return ends.pop(0)

    with trio.move_on_after(100):
        await with_backoff(run, Backoff(first=1.0, cap=8.0, stable=5.0))
    assert said == [1.0, 1.0, 2.0]  # the 9 s run reset the back-off, the 1 s one did not
    assert [t - starts[0] for t in starts] == [0.0, 0.0, 1.0, 1.0, 2.0, 4.0]
