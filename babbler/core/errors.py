"""The exceptions babbler raises on purpose: one tree, defined here at its root and beside
the code that raises the rest.

BabblerError            anything babbler reports to a person as one clear line
├── ConfigError         a flag or config-file value is wrong (exit code 2)
├── EnvironmentProblem  the machine is not fit to run on: unsafe directory, no babeld (exit 1)
├── KernelError         the system refused an address or route change (carries errno)
├── BabeldError         babeld misbehaved: exited, no greeting in time, a bad reply
│   ├── BabeldExited    the babeld process ended (carries its exit code and last output)
│   └── ControlCut      babeld cut its control connection but runs on (daemon/babeld/control)
├── ClientError         a client of the public socket failed (client/errors.py):
│   └── NotRunning, AccessDenied, Disconnected, Refused (and TooSlow), ProtocolError
├── BenchError          a link bench measurement failed (bench/runner.py)
└── LabError            the lab could not be built or run (lab/topology.py)

Not for people, caught where they are raised: MalformedLine (a babeld line that does not
parse, core/babeld_lines.py), BadRequest (a public-socket request, answered `bad ...`,
daemon/requests.py), BadBenchRequest (a bench request, bench/wire.py).
"""

from __future__ import annotations


class BabblerError(Exception):
    """Base class: the message is meant for a person, in one line."""


class ConfigError(BabblerError):
    """A flag or configuration value is invalid; nothing has been changed."""


class EnvironmentProblem(BabblerError):
    """The machine cannot host the daemon as configured (unsafe directory, missing program)."""


class KernelError(BabblerError):
    """The system refused an address or route change: a netlink error on Linux, a failed
    ifconfig/route command on macOS (errno EIO unless it is known)."""

    def __init__(self, message: str, errno: int) -> None:
        super().__init__(message)
        self.errno = errno


class BabeldError(BabblerError):
    """babeld did not behave as its protocol promises."""


class BabeldExited(BabeldError):
    """The babeld process ended; `returncode` is its exit status, `output` its last lines."""

    def __init__(self, returncode: int | None, output: str = "") -> None:
        detail = f": {output}" if output else ""
        super().__init__(f"babeld {exit_text(returncode)}{detail}")
        self.returncode = returncode
        self.output = output


def exit_text(returncode: int | None) -> str:
    """How a process ended, as people say it: `exited with status 1`, `killed by SIGKILL`
    (a negative status is the signal that ended it)."""
    if returncode is None:
        return "ended"
    if returncode < 0:
        name = SIGNALS.get(-returncode)
        return f"killed by {name}" if name else f"killed by signal {-returncode}"
    return f"exited with status {returncode}"


# The signals that end processes, by number (the same on Linux and macOS).
SIGNALS = {1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 6: "SIGABRT", 8: "SIGFPE",
           9: "SIGKILL", 11: "SIGSEGV", 13: "SIGPIPE", 14: "SIGALRM", 15: "SIGTERM"}  # fmt: skip
