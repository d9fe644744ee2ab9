"""Exponential back-off, the one kind babbler uses (babeld's restarts, the bench responder's,
a client's reconnects), each with its own numbers. Pure.

`delay()` gives the pause before the next try: `first`, then doubled each time up to `cap`,
each varied by +-`jitter` (a fraction) so that many clients of one restarted daemon do not
come back at once. `ran(seconds)` tells how long the thing ran before it failed: a run of
`stable` seconds or more resets the back-off, so a child that fails at once backs off to the
cap while one that fails now and then is back after `first` each time.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field


@dataclass
class Backoff:
    first: float
    cap: float
    jitter: float = 0.0
    stable: float = math.inf  # a run this long resets the back-off
    _next: float = field(default=0.0, init=False)
    _random: random.Random = field(default_factory=random.Random, repr=False)

    def delay(self) -> float:
        """The pause before the next try; each is about twice the one before, up to `cap`."""
        base = self._next or self.first
        self._next = min(base * 2, self.cap)
        if not self.jitter:
            return base
        return base * (1 + self._random.uniform(-self.jitter, self.jitter))

    def reset(self) -> None:
        """After a success: the next failure waits `first` again."""
        self._next = 0.0

    def ran(self, seconds: float) -> None:
        """The thing ran this long before it failed; long enough, and the back-off resets."""
        if seconds >= self.stable:
            self.reset()
