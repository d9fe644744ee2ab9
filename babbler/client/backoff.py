"""When and how a `watch` reconnects (pure): `Backoff` says how long to wait between tries
(babbler's one back-off, core/backoff.py, with a client's numbers: jitter, so that many
clients of a restarted daemon do not all come back at once); `Reconnecting` is the policy
the blocking and async clients share."""

from __future__ import annotations

from dataclasses import dataclass

from babbler.client.errors import ClientError
from babbler.client.model import Event, Lost, Snapshot
from babbler.core import backoff as core_backoff

FIRST = 0.1  # a restarting babblerd serves again within ~0.1-0.3 s (docs/benchmarks.md)
CAP = 5.0  # a stopped one: try every few seconds, no more
JITTER = 0.2  # +-20 %


@dataclass
class Backoff(core_backoff.Backoff):
    """The reconnect back-off (core/backoff.py), with a client's numbers."""

    first: float = FIRST
    cap: float = CAP
    jitter: float = JITTER


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
