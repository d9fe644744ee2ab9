"""When and how a `watch` reconnects (pure): `Backoff` says how long to wait between tries,
doubling from `first` to `cap`, with jitter so that many clients of a restarted daemon do
not all come back at once; `Reconnecting` is the policy the blocking and async clients share."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from babbler.client.errors import ClientError
from babbler.client.model import Event, Lost, Snapshot

FIRST = 0.1  # a restarting babblerd serves again within ~0.1-0.3 s (docs/benchmarks.md)
CAP = 5.0  # a stopped one: try every few seconds, no more
JITTER = 0.2  # +-20 %


@dataclass
class Backoff:
    first: float = FIRST
    cap: float = CAP
    jitter: float = JITTER
    _next: float = field(default=0.0, init=False)
    _random: random.Random = field(default_factory=random.Random, repr=False)

    def delay(self) -> float:
        """The pause before the next try; each is about twice the one before, up to `cap`."""
        base = self._next or self.first
        self._next = min(base * 2, self.cap)
        return base * (1 + self._random.uniform(-self.jitter, self.jitter))

    def reset(self) -> None:
        """After a success: the next failure waits `first` again."""
        self._next = 0.0


class Reconnecting:
    """A watch's reconnect policy: with `reconnect`, a failure is told once as Lost (until
    a Snapshot shows the stream is back) and followed by a back-off pause; without it, the
    failure is raised."""

    def __init__(self, reconnect: bool) -> None:
        self.reconnect = reconnect
        self.backoff = Backoff()
        self.said_lost = False

    def seen(self, event: Event) -> Event:
        if isinstance(event, Snapshot):
            self.backoff.reset()
            self.said_lost = False
        return event

    def failed(self, error: ClientError) -> tuple[Lost | None, float]:
        """What to tell the program (or None) and how long to wait. Raises `error` when not
        reconnecting."""
        if not self.reconnect:
            raise error
        lost = None if self.said_lost else Lost(str(error))
        self.said_lost = True
        return lost, self.backoff.delay()
