"""A client that follows `watch` or `monitor` in a thread, as a user's program would."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from babbler.client import Connection
from babbler.core.errors import BabblerError


class Follower:
    def __init__(self, socket_path: Path, request: str = "watch") -> None:
        self.conn = Connection(socket_path, timeout=None)
        self.conn.send(request)
        self.lines: list[tuple[float, str]] = []
        self.closed = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            for line in self.conn.lines():
                self.lines.append((time.monotonic(), line))
        except (BabblerError, OSError, ValueError):
            pass
        self.closed.set()

    def events(self, kind: str) -> list[dict[str, Any]]:
        out = []
        for _, line in list(self.lines):
            if line.startswith("{"):
                event = json.loads(line)
                if event.get("type") == kind:
                    out.append(event)
        return out

    def close(self) -> None:
        self.conn.hang_up()
        self._thread.join(timeout=10)
        self.conn.close()
