"""A kernel that fails or hangs, as the daemon takes it: it keeps the last good state, says
each kind of failure once, and tries again with back-off. Pure.

Each reconcile pass reports the problems it met, each `WHAT: DETAIL` (`cannot read links:
no answer in 6 s`, `cannot set net.inet6.ip6.forwarding=1: ...`); the WHAT is its kind.
`KernelHealth` keeps the first as `status.kernel_problem`, tells which to log (a kind not
said since the last clean pass), when the kernel answers again, and when to try again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from babbler.core.backoff import Backoff

# The first retry after a failed pass: a netlink dump refused under memory pressure, or a
# command that lost a race with a link going away, usually goes through at once.
RETRY_FIRST = 0.5
# The longest pause between retries: a kernel that keeps failing is asked twice a minute
# (babeld's restarts have the same cap); any link event still tries at once.
RETRY_CAP = 30.0
# `kernel_problem` is one short line, whatever a command printed.
PROBLEM_MAX = 200


def kind(problem: str) -> str:
    """What failed, without why: `cannot read links` of `cannot read links: ...`."""
    return problem.partition(": ")[0]


def shortened(problem: str) -> str:
    """One line of at most PROBLEM_MAX characters."""
    line = " ".join(problem.split())
    return line if len(line) <= PROBLEM_MAX else line[: PROBLEM_MAX - 3] + "..."


@dataclass(frozen=True)
class Verdict:
    """What to do after a pass."""

    said: tuple[str, ...]  # problems to log: their kind was not said since the last clean pass
    recovered: int  # failed passes before this clean one (0: nothing to say)
    retry_in: float | None  # seconds until a pass should be tried again; None: no need


@dataclass
class KernelHealth:
    first: float = RETRY_FIRST
    cap: float = RETRY_CAP
    problem: str | None = None  # status.kernel_problem: the first problem of the last pass
    _failed: int = 0  # passes in a row with a problem
    _said: set[str] = field(default_factory=set)
    _backoff: Backoff = field(init=False)

    def __post_init__(self) -> None:
        self._backoff = Backoff(self.first, self.cap, jitter=0.1)

    def after_pass(self, problems: Sequence[str]) -> Verdict:
        """A pass ended with `problems` (none: it went through)."""
        if not problems:
            recovered, self._failed = self._failed, 0
            self.problem = None
            self._said.clear()
            self._backoff.reset()
            return Verdict((), recovered, None)
        shown = [shortened(p) for p in problems]
        self.problem = shown[0]
        self._failed += 1
        said = []
        for problem in shown:
            if kind(problem) not in self._said:
                self._said.add(kind(problem))
                said.append(problem)
        return Verdict(tuple(said), 0, self._backoff.delay())
