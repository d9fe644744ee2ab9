"""babblerd's side of the bench responder: run it as its own unprivileged process on the
node address while the mesh runs, restart it if it exits, never leave it behind (it is
forked like babeld: it gets SIGKILL when babblerd dies, babeld/launch.py)."""

from __future__ import annotations

import os
import sys

import structlog
import trio

from babbler.core.errors import EnvironmentProblem
from babbler.daemon.babeld.launch import nobody_can_run, spawn
from babbler.daemon.babeld.process import BabeldProcess

log = structlog.get_logger("babbler.bench")

FIRST_PAUSE = 1.0  # seconds before a restart, doubling to MAX_PAUSE while it keeps exiting
MAX_PAUSE = 60.0
STEADY = 60.0  # a responder that ran this long before exiting restarts after FIRST_PAUSE


def command(address: str, port: int) -> list[str]:
    program = [sys.executable, "-m", "babbler.bench.responder"]
    return [*program, "--address", address, "--port", str(port)]


async def run_responder(address: str, port: int) -> None:
    """Keep the responder running until cancelled; then stop it."""
    if os.getuid() == 0 and not nobody_can_run():
        log.warning(
            "bench responder runs as root without any capability: user nobody cannot run "
            "this Python (install babbler where every user can read it to run it as nobody)",
            python=sys.executable,
        )
    pause = FIRST_PAUSE
    while True:
        started = trio.current_time()
        try:
            child = BabeldProcess(spawn(command(address, port), unprivileged=True), "bench")
        except EnvironmentProblem as problem:  # never the daemon's end: the bench is extra
            log.error("bench responder not started", error=str(problem), pause=pause)
            await trio.sleep(pause)
            pause = min(pause * 2, MAX_PAUSE)
            continue
        log.info("bench responder started", pid=child.pid, address=address, port=port)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(child.pump_output)
                status = await child.wait()
        finally:
            with trio.CancelScope(shield=True):
                await child.stop()
        if trio.current_time() - started >= STEADY:
            pause = FIRST_PAUSE
        log.warning("bench responder exited", status=status, output=child.output(), pause=pause)
        await trio.sleep(pause)
        pause = min(pause * 2, MAX_PAUSE)
