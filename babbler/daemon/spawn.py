"""Forking babblerd's children (babeld, the bench responder) so that they never outlive it,
telling whether a process still lives, and stopping one (SIGTERM, a grace, SIGKILL: the one
shape the early start, the children, a stale babeld and the lab's daemons are stopped by).

Lean on purpose (standard library only): the early start forks babeld from here before trio
is imported (daemon/early.py). Linux ties PR_SET_PDEATHSIG to the thread that forked, and
trio's process helpers fork from worker threads that retire when idle (the child then dies
~10 s later, BABELD.md), so every child is forked from the thread that runs trio, with
`subprocess.Popen`; daemon/children.py waits for it.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import stat
import subprocess
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from babbler.core.errors import EnvironmentProblem
from babbler.host.system import LINUX_HOST

PR_SET_PDEATHSIG = 1
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
CAP_LAST = 63  # more than the kernel has: dropping an unknown one fails harmlessly
NOBODY = 65534  # the user an unprivileged child of a root babblerd runs as
# How long a process babbler ends gets to exit after SIGTERM before SIGKILL; babeld takes
# 30-60 ms when healthy.
STOP_GRACE = 2.0
# babeld's CPU priority (its nice and, on Linux, its session's autogroup's): ahead of
# babblerd and the host's ordinary work. babeld needs little CPU but on time: at hello 0.1 s
# it counts a hello missed when it has not run for ~170 ms. In a 64-ring on 2 cores, babeld
# at nice 0 missed hellos while the 64 babblerd started, routes came and went, and the mesh
# churned for minutes (2 runs of 2 on this machine, 40e2cb8 too, "Late hello" in every
# log); at -10, 5 runs of 5 converged (docs/benchmarks.md "The first minute").
ROUTING_NICE = -10
# The bench responder's: behind everything. A measuring tool nobody uses most of the time,
# yet a Python start-up at every babblerd start (0.2 s of CPU): in that 64-ring 64 of them
# took a quarter of the CPU the mesh formed on. On a quiet host it has the CPU all the same.
BACKGROUND_NICE = 10


def _die_with_parent_hook(
    unprivileged: bool, tied: bool, nice: int = 0
) -> Callable[[], None] | None:
    """A preexec function that, `tied`, makes the child get SIGKILL when this process dies
    (PR_SET_PDEATHSIG: the platform's choice, core/platform.py; macOS has none).
    `nice`: the child's (see `_set_nice`).
    With `unprivileged` the child sheds every capability (also a non-root babblerd's ambient
    ones, which it would inherit) and, from root, becomes nobody when nobody can run this
    Python (else it stays uid 0 without any capability: see `nobody_can_run`)."""
    tied = tied and LINUX_HOST
    if not tied and not unprivileged and not nice:
        return None
    parent = os.getpid()
    libc = ctypes.CDLL(None, use_errno=True) if LINUX_HOST else None
    become_nobody = unprivileged and os.getuid() == 0 and nobody_can_run()

    def hook() -> None:
        if nice:
            _set_nice(nice, own_session=tied)  # tied: Popen's setsid ran before this
        if unprivileged and libc is not None:
            libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
            for cap in range(CAP_LAST + 1):  # root's capabilities after exec: none
                libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
            libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        if become_nobody:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
        if tied and libc is not None:  # after setuid, which clears it
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() != parent:  # the parent died before prctl took effect
                os._exit(1)

    return hook


def _set_nice(nice: int, own_session: bool) -> None:
    """This (forked) process at `nice`, and, in a session of its own, that session's
    autogroup, where the kernel shares the CPU between sessions first (Linux). Never the
    autogroup of a session the child shares with babblerd (untied: a Mac's, or the macOS
    lab's on Linux): that would set babblerd's own, last spawn winning. Best effort: a babeld
    at nice 0 still routes."""
    if own_session:
        with contextlib.suppress(OSError):  # no autogroup built in, or no CAP_SYS_NICE
            Path("/proc/self/autogroup").write_text(f"{nice}\n")
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, 0, nice)


def nobody_can_run() -> bool:
    """Whether any user may run this Python and read babbler: every directory on the way to
    both searchable by others, the interpreter executable by them. A virtualenv under
    /root (mode 0700) is not."""
    import babbler

    targets = [Path(os.path.realpath(sys.executable)), Path(babbler.__file__).resolve()]
    for target in targets:
        for part in [target, *target.parents]:
            try:
                mode = part.stat().st_mode
            except OSError:
                return False
            if not mode & (stat.S_IXOTH if part != targets[1] else stat.S_IROTH):
                return False
    return True


def spawn(
    args: Sequence[str], unprivileged: bool = False, tied: bool = True, nice: int = 0
) -> subprocess.Popen[bytes]:
    """Fork babeld (or, `unprivileged`, another child: the bench responder) from the calling
    thread (Linux ties PR_SET_PDEATHSIG to it: call this from the thread that lives as long
    as babblerd), output piped, files 0600. `tied`: the child dies with babblerd
    (Platform.children_die_with_babblerd), and then runs in a session of its own: where the
    kernel shares the CPU between sessions first (Linux's autogroup, on by default), babeld
    in babblerd's session was charged for babblerd's start-up and missed its 0.1 s hellos
    (a 64-ring on 2 cores never converged; in sessions of their own, 5 runs of 5 did:
    docs/benchmarks.md "The first minute"). Untied (macOS), it stays in babblerd's process
    group, which launchd ends when babblerd exits. `nice`: babeld's ROUTING_NICE, ahead of
    babblerd's own work, the responder's BACKGROUND_NICE, behind it. Raises
    EnvironmentProblem when it cannot be executed."""
    try:
        return subprocess.Popen(
            list(args),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent_hook(unprivileged, tied, nice),
            close_fds=True,
            umask=0o077,  # its control socket and pid file: 0600 (in a 0700 directory)
            start_new_session=tied,
        )
    except OSError as error:
        raise EnvironmentProblem(
            f"cannot run {Path(args[0]).name} ({args[0]}): {error.strerror or error}"
        ) from None


def process_name(pid: int) -> str | None:
    """The name of a live process, or None. A zombie counts as gone: orphans that died can
    stay zombies for a while where PID 1 reaps slowly."""
    if not LINUX_HOST:
        return _ps_name(pid)
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # "pid (comm) state ...": comm may hold spaces and parentheses.
    name, _, rest = stat.partition("(")[2].rpartition(")")
    return None if rest.split()[:1] == ["Z"] else name


def _ps_name(pid: int) -> str | None:
    """process_name without /proc (macOS): ps's state and command name."""
    result = subprocess.run(
        ["ps", "-o", "stat=,comm=", "-p", str(pid)], capture_output=True, text=True, check=False
    )
    state, _, command = result.stdout.strip().partition(" ")
    if result.returncode != 0 or not command or state.startswith("Z"):
        return None
    return Path(command.strip()).name


# -- stopping: SIGTERM, a grace, then SIGKILL -------------------------------------------------
# One shape for every process babbler ends: `send` signals it (through a Popen, a pid or a
# pidfd), `gone(grace)` waits up to `grace` seconds and says whether it has exited.


def stop(send: Callable[[int], None], gone: Callable[[float], bool], grace: float) -> bool:
    """SIGTERM, then SIGKILL if it has not gone within `grace`; True if SIGTERM was enough."""
    send(signal.SIGTERM)
    if gone(grace):
        return True
    send(signal.SIGKILL)
    return False


async def stop_async(
    send: Callable[[int], None], gone: Callable[[float], Awaitable[bool]], grace: float
) -> bool:
    """`stop` for a caller on the trio loop: `gone` waits without blocking it."""
    send(signal.SIGTERM)
    if await gone(grace):
        return True
    send(signal.SIGKILL)
    return False


def popen_gone(popen: subprocess.Popen[bytes]) -> Callable[[float], bool]:
    """`gone` for a child of this process: waits on it (and reaps it when it exits)."""

    def gone(grace: float) -> bool:
        try:
            popen.wait(grace)
        except subprocess.TimeoutExpired:
            return False
        return True

    return gone
