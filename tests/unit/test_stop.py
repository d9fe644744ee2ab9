"""Stopping a process with a grace (daemon/spawn.py `stop`), the one way babbler ends a
process: SIGTERM, then SIGKILL only when the grace has passed."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from babbler.daemon.spawn import popen_gone, stop

# A child that says when its SIGTERM handling is set, then sleeps.
CHILD = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN if sys.argv[1] == 'ignore' else signal.SIG_DFL)\n"
    "print('ready', flush=True)\n"
    "time.sleep(30)\n"
)


def started(on_sigterm: str) -> subprocess.Popen[bytes]:
    popen = subprocess.Popen([sys.executable, "-c", CHILD, on_sigterm], stdout=subprocess.PIPE)
    assert popen.stdout is not None and popen.stdout.readline() == b"ready\n"
    return popen


@pytest.mark.parametrize(
    ("on_sigterm", "grace", "enough", "status"),
    [("ignore", 0.2, False, -signal.SIGKILL), ("default", 5.0, True, -signal.SIGTERM)],
    ids=["ignoring-sigterm-is-killed-once-the-grace-passed", "ending-on-sigterm-gets-no-sigkill"],
)
def test_a_process_is_stopped_with_a_grace(
    on_sigterm: str, grace: float, enough: bool, status: int
) -> None:
    popen = started(on_sigterm)
    try:
        assert stop(popen.send_signal, popen_gone(popen), grace) is enough
        assert popen.wait(5) == status
    finally:
        popen.kill()
        popen.communicate()
