"""Stopping a process with a grace (daemon/spawn.py `stop`), the one way babbler ends a
process: SIGTERM, then SIGKILL only when the grace has passed."""

from __future__ import annotations

import signal
import subprocess
import sys

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


def test_a_process_that_ignores_sigterm_is_killed_once_the_grace_passed() -> None:
    popen = started("ignore")
    try:
        assert stop(popen.send_signal, popen_gone(popen), grace=0.2) is False
        assert popen.wait(5) == -signal.SIGKILL
    finally:
        popen.kill()
        popen.communicate()


def test_a_process_that_ends_on_sigterm_gets_no_sigkill() -> None:
    popen = started("default")
    try:
        assert stop(popen.send_signal, popen_gone(popen), grace=5) is True
        assert popen.wait(5) == -signal.SIGTERM
    finally:
        popen.kill()
        popen.communicate()
