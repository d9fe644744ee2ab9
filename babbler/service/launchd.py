"""babblerd as a macOS LaunchDaemon, in one command each way: the plist (from the shipped
one, babbler/service/files/org.babbler.babblerd.plist) in /Library/LaunchDaemons,
`launchctl bootstrap`, the wait for the socket; uninstall (and --purge) and status.

A stub for now: h5 fills it (issue 35, its macOS half). The signatures are the ones
command.py calls; systemd.py is the Linux counterpart to follow.
"""

from __future__ import annotations

from collections.abc import Callable

from babbler.core.errors import EnvironmentProblem
from babbler.core.platform import MACOS
from babbler.service import plan

Say = Callable[[str], None]

NOT_YET = "the macOS service install is not written yet: docs/operations.md has the steps"


def install(request: plan.Request, say: Say) -> int:
    """Install, or bring up to date, babblerd as the LaunchDaemon; say what changed (or
    "no change"), wait until it answers, print its status. Raises EnvironmentProblem
    (refused, nothing changed) and ConfigError."""
    raise EnvironmentProblem(NOT_YET)


def uninstall(purge: bool, say: Say) -> int:
    """Boot out and remove what install added; keep the state dir unless `purge`."""
    raise EnvironmentProblem(NOT_YET)


def status() -> plan.Status:
    """What is installed and whether it runs."""
    return plan.Status(platform=MACOS.key, installed=False, running=False)
