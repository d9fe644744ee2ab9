"""What the client raises. Every one is a BabblerError: its message is one line for a person.

ClientError          anything the client could not do
├── NotRunning       nothing serves the socket (no file, nothing listening, no accept in time)
├── AccessDenied     the socket exists but this user may not connect to it
├── Disconnected     babblerd closed the connection (it stopped or restarted)
├── Refused          babblerd answered `no ...` (e.g. `no too many clients`)
│   └── TooSlow      babblerd cut this client off: it did not read fast enough
└── ProtocolError    babblerd said something this client does not understand, or `bad ...`
"""

from __future__ import annotations

from babbler.core.errors import BabblerError


class ClientError(BabblerError):
    """The client could not do what was asked."""


class NotRunning(ClientError):
    """Nothing serves the socket: babblerd is not running (or not at this path)."""


class AccessDenied(ClientError):
    """The socket exists but this user may not connect to it."""


class Disconnected(ClientError):
    """babblerd closed the connection, e.g. because it stopped or restarted."""

    @classmethod
    def at(cls, path: object) -> Disconnected:
        return cls(f"babblerd closed the connection ({path})")


class Refused(ClientError):
    """babblerd answered `no <reason>`; `reason` is its words."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"babblerd said: no {reason}")
        self.reason = reason


class TooSlow(Refused):
    """babblerd cut this client off because it did not read its stream fast enough; what
    it sent since is lost (a `watch` reconnect starts again from a snapshot)."""


class ProtocolError(ClientError):
    """An answer this client cannot use: `bad ...`, a malformed line, JSON of the wrong shape."""
