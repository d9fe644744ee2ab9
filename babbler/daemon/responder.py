"""babblerd's side of the bench responder (docs/bench.md): run it as its own unprivileged
process on the node addresses while the mesh runs, restart it if it exits, never leave it
behind (a child like babeld: daemon/spawn.py, daemon/children.py). The program itself is
bench/responder.py; the daemon knows it only by its module name, so bench/ imports nothing
of the daemon's and the daemon nothing of the bench's.

`while_mesh_runs` is what the daemon starts with the mesh: the responder on the node
addresses as `Place` (a port) reads them, started anew when they move.

Where children do not die with babblerd (macOS: no death signal) a killed babblerd's
responder runs on and holds the bench port: each one started is recorded in PID_FILE, and
the next babblerd's start ends the one recorded there (`end_stale`), as it does a stale
babeld (daemon/babeld/process.py)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import structlog

from babbler.core.addressing import node_address
from babbler.core.backoff import Backoff
from babbler.core.config import Config
from babbler.daemon.children import keep_running, stop_stale
from babbler.daemon.ipv4 import Ipv4
from babbler.daemon.nodeid import write_state_file
from babbler.daemon.spawn import BACKGROUND_NICE, nobody_can_run, spawn
from babbler.daemon.wakeup import Signal, rerun_on
from babbler.host.system import LINUX_HOST

log = structlog.get_logger("babbler.bench")

FIRST_PAUSE = 1.0  # seconds before a restart, doubling to MAX_PAUSE while it keeps exiting
MAX_PAUSE = 60.0
STEADY = 60.0  # a responder that ran this long before exiting restarts after FIRST_PAUSE
# The responder's program, run as `python -m` (its own process, no daemon module in it).
PROGRAM = "babbler.bench.responder"
# The responder babblerd runs, under its private run dir: {"pid": N, "command": [argv]}.
PID_FILE = "responder.pid"
RECORD_LIMIT = 65536  # bytes of it read: a record is a few hundred


def wanted(config: Config) -> bool:
    """Whether babblerd runs the responder while the mesh runs."""
    return config.bench == "on" and bool(config.bench_port)


def command(
    address: str, port: int, address_v4: str | None = None, ipv4_prefix: str | None = None
) -> list[str]:
    program = [sys.executable, "-m", PROGRAM]
    ipv4 = ["--address-v4", address_v4, "--ipv4-prefix", str(ipv4_prefix)] if address_v4 else []
    return [*program, "--address", address, *ipv4, "--port", str(port)]


async def run_responder(
    private_dir: Path,
    address: str,
    port: int,
    address_v4: str | None = None,
    ipv4_prefix: str | None = None,
    tied: bool = True,
) -> None:
    """Keep the responder running until cancelled, each one started recorded in
    `private_dir` (PID_FILE); then stop it and remove the record."""
    if os.getuid() == 0 and not nobody_can_run():
        log.warning(
            "bench responder runs as root without any capability: user nobody cannot run "
            "this Python (install babbler where every user can read it to run it as nobody)",
            python=sys.executable,
        )
    log.info("bench responder", address=address, port=port)
    backoff = Backoff(FIRST_PAUSE, MAX_PAUSE, stable=STEADY)  # extra: never the daemon's end
    args = command(address, port, address_v4, ipv4_prefix)

    def start() -> subprocess.Popen[bytes]:
        child = spawn(args, True, tied, BACKGROUND_NICE)
        record = json.dumps({"pid": child.pid, "command": args})
        problem = write_state_file(private_dir, PID_FILE, record + "\n")
        if problem:  # it would outlive a killed babblerd unseen (macOS): say so
            log.warning("cannot record the bench responder", error=problem)
        return child

    try:
        await keep_running(start, "bench responder", backoff)
    finally:
        with contextlib.suppress(FileNotFoundError):
            (private_dir / PID_FILE).unlink()  # stopped: keep_running ends it first


@dataclass(frozen=True)
class Place:
    """Where the responder runs, read at each start (a port)."""

    config: Callable[[], Config]
    node_id: Callable[[], int]
    ipv4: Callable[[], Ipv4]  # its node address and prefix, if IPv4 is on
    moved: Signal  # the node addresses moved: start it anew there


async def while_mesh_runs(place: Place) -> None:
    """The responder on the node addresses until cancelled (the mesh stopped), moved when
    either moves; nothing when the settings do not want it."""
    if wanted(place.config()):
        await rerun_on(place.moved, lambda: on_node_addresses(place))


async def on_node_addresses(place: Place) -> None:
    config, ipv4 = place.config(), place.ipv4()
    address = str(node_address(place.node_id()))
    address_v4 = None if ipv4.node_address is None else str(ipv4.node_address)
    prefix = None if ipv4.prefix is None else str(ipv4.prefix)
    tied = config.platform.children_die_with_babblerd
    await run_responder(config.private_dir, address, config.bench_port, address_v4, prefix, tied)


# -- a responder left by an earlier babblerd ---------------------------------------------------


def _read_record(path: Path) -> tuple[int, str] | None:
    """(pid, command line) from a responder's record; None when absent, a symlink (never
    followed: a planted link must not make us signal whatever it names) or not a record."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd) as file:
            record = json.loads(file.read(RECORD_LIMIT))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict):
        return None
    pid, args = record.get("pid"), record.get("command")
    if type(pid) is not int or pid <= 0 or not isinstance(args, list) or not args:
        return None
    if not all(isinstance(word, str) for word in args):
        return None
    return pid, " ".join(args)


def _command_of(pid: int) -> str | None:
    """A live process's command line, its words joined by spaces; None when it is gone."""
    if LINUX_HOST:
        try:
            words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]
        except OSError:
            return None
        return " ".join(word.decode(errors="replace") for word in words)  # a zombie's: ""
    ps = ["ps", "-ww", "-o", "command=", "-p", str(pid)]
    result = subprocess.run(ps, capture_output=True, text=True, check=False)
    return result.stdout.strip() if result.returncode == 0 else None


async def end_stale(private_dir: Path) -> int | None:
    """Stop the bench responder an earlier babblerd recorded in `private_dir` (PID_FILE),
    if that pid still runs the very command recorded (never a stranger that got the pid:
    on Linux it is held by a pidfd from before the check), then remove the record.
    Returns the pid stopped, if any."""
    path = private_dir / PID_FILE
    record = _read_record(path)
    stopped = None if record is None else await _end(*record)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    return stopped


async def _end(pid: int, line: str) -> int | None:
    def say() -> None:
        log.warning("stopping a bench responder an earlier babblerd left", pid=pid)

    stopped = await stop_stale(pid, lambda: _command_of(pid) == line, say)
    return pid if stopped else None
