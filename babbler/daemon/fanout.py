"""Fan-out: the connected clients, their bounded outgoing queues, and live lines and events.

Nobody waits for a client. What a client is offered is written at once when nothing of its
is queued and its socket takes it (one non-blocking write, no task switch: a burst reaches
a thousand clients in a few milliseconds); the rest goes to its queue, which its writer task
sends. Each client's queue is bounded in bytes (answers and live lines alike) and filled
without blocking; a client that would go over the bound is marked too
slow and ended (`no too slow`), and nobody else notices. While a client's writer is behind,
its requests are not read (`wait_caught_up`), so a client that sends requests and never
reads holds a bounded amount of memory and is ended when it stays behind.
"""

from __future__ import annotations

import collections
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import trio

# Bytes gathered into one write.
BATCH_BYTES = 65536


def encode_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=False)


@dataclass(frozen=True)
class Limits:
    """What one client of the public socket may hold, and how many there may be."""

    # Bytes queued for one client before it is too slow: a dump of a 64-node table (~100 KB)
    # several times over, or a few seconds of a busy mesh's `monitor` lines.
    queue_bytes: int = 1 << 20
    # While more than this is queued the client's requests are not read: its writer is behind.
    behind_bytes: int = 256 << 10
    # A client whose writer stays behind this long (it sends requests and does not read the
    # answers) is too slow.
    stall_limit: float = 10.0
    # Clients at once, everyone together; one more is told `no too many clients` and closed.
    # Each holds a descriptor: with the daemon's own few dozen this stays well under the 4,096
    # babblerd raises its soft limit to (daemon/cli.py WANTED_FDS).
    max_clients: int = 1024
    # Kept for root and the daemon's own user: all other users together hold at most
    # max_clients minus this, so root's `babblerctl status` (the doctor, a service check) gets
    # in however many connections others hold.
    kept_for_root: int = 64
    # Connections one other user may hold (the peer's uid, from the kernel): a program of
    # theirs holds one or two (a `watch`, a status loop), so this is room for a hundred, and
    # one user at it leaves most of the others' share to the other users.
    per_user: int = 256


Send = Callable[[bytes], int]  # a non-blocking write: bytes taken; raises BlockingIOError


class Client:
    """One connection's subscriptions and outgoing queue."""

    def __init__(
        self,
        number: int,
        send_now: Send | None = None,
        limits: Limits = Limits(),
        uid: int | None = 0,
    ) -> None:
        self.number = number
        self.uid = uid  # the peer's user, None when the system does not say
        self.limits = limits
        self._send_now = send_now
        self.monitor = False
        self.watch = False
        self.header_id: str | None = None  # the router id its header named (`my-id`)
        self.too_slow = False
        self.scope = trio.CancelScope()
        # The rest of a line whose start was written when writing was cut short: sent
        # before the farewell so the client only ever sees whole lines.
        self.unfinished = b""
        self._queue: collections.deque[bytes] = collections.deque()
        self._in_flight = False  # the writer holds a batch it has not finished sending
        self.queued = 0  # bytes
        self._closed = False
        self._wake = trio.Event()
        self._caught_up = trio.Event()

    @property
    def subscribed(self) -> bool:
        return self.monitor or self.watch

    def offer(self, text: str | bytes) -> None:
        """Write or queue whole lines for the client; never blocks. Over the bound: too
        slow, ended."""
        if self.too_slow or self._closed:
            return
        data = text.encode() if isinstance(text, str) else text
        if self._send_now is not None and not self._queue and not self._in_flight:
            data = self._write_now(data)
            if not data:
                return
        if self.queued + len(data) > self.limits.queue_bytes:
            self.cut_off()
            return
        self._queue.append(data)
        self.queued += len(data)
        self._wake.set()

    def _write_now(self, data: bytes) -> bytes:
        """Write what the socket takes at once; return the rest (queued by the caller). A
        failing socket is left to the writer task, which meets the same error and ends."""
        assert self._send_now is not None
        try:
            sent = self._send_now(data)
        except OSError:
            return data
        if 0 < sent < len(data) and data[sent - 1] != ord("\n"):
            self.unfinished = data[sent : data.index(b"\n", sent) + 1]
        return data[sent:]

    def cut_off(self) -> None:
        """Mark the client too slow and end its connection."""
        self.too_slow = True
        self.scope.cancel()

    def close(self) -> None:
        """Nothing more will be queued; the writer ends once the queue is sent."""
        self._closed = True
        self._wake.set()

    async def next_batch(self) -> bytes | None:
        """Queued bytes to write (up to BATCH_BYTES, at least one item); None once closed
        and empty."""
        while not self._queue:
            if self._closed:
                return None
            await self._wake.wait()
            self._wake = trio.Event()
        self._in_flight = True
        batch = [self._queue.popleft()]
        size = len(batch[0])
        while self._queue and size + len(self._queue[0]) <= BATCH_BYTES:
            batch.append(self._queue.popleft())
            size += len(batch[-1])
        self.queued -= size
        if self.queued <= self.limits.behind_bytes:
            self._caught_up.set()
        return b"".join(batch)

    def batch_sent(self) -> None:
        """The writer sent its whole batch: no line is open, and writes may go direct."""
        self._in_flight = False
        self.unfinished = b""

    async def wait_caught_up(self) -> None:
        """Return once the writer is not behind; cut the client off if it stays behind for
        `limits.stall_limit` seconds."""
        with trio.move_on_after(self.limits.stall_limit) as stall:
            while self.queued > self.limits.behind_bytes:
                self._caught_up = trio.Event()
                await self._caught_up.wait()
        if stall.cancelled_caught:
            self.cut_off()
            await trio.sleep_forever()  # the scope's cancellation takes it from here


class Hub:
    """The set of connected clients, and fan-out to the subscribed ones.

    Published lines and events are gathered and flushed together, one queue item per client
    per flush: babeld writes lines in bursts, and one item per line would cost a wake-up
    each. `run` flushes whenever something was published; `flush` is also called before a
    client subscribes, so its snapshot and the stream never overlap.
    """

    def __init__(
        self, on_subscribers_changed: Callable[[], None] = lambda: None, limits: Limits = Limits()
    ) -> None:
        self.limits = limits
        self.clients: set[Client] = set()
        # Users with room kept (Limits.kept_for_root); everyone else is counted per user.
        self.privileged = frozenset({0, os.geteuid()})
        self._per_user: collections.Counter[int | None] = collections.Counter()
        self._others = 0  # clients of users not privileged
        self._counter = 0
        self._on_change = on_subscribers_changed
        self._pending: list[tuple[bool, str]] = []  # (is a watch event, text with newline)
        self._wake = trio.Event()
        self.items_out = 0  # live lines and events queued to clients, one per client each
        # Clients subscribed to each stream, counted as subscriptions change: a fact nobody
        # subscribes to costs nothing, not a walk over every client.
        self.monitoring = 0
        self.watching = 0

    @property
    def subscribers(self) -> int:
        return sum(1 for c in self.clients if c.subscribed)

    def _recount(self) -> None:
        self.monitoring = sum(1 for c in self.clients if c.monitor)
        self.watching = sum(1 for c in self.clients if c.watch)
        self._on_change()

    def admits(self, uid: int | None) -> bool:
        """Whether one more client of user `uid` (None: unknown) is served: within
        `max_clients` for root and the daemon's user; within their share and `per_user`
        for everyone else (Limits)."""
        limits = self.limits
        if len(self.clients) >= limits.max_clients:
            return False
        if uid in self.privileged:
            return True
        share = limits.max_clients - limits.kept_for_root
        return self._others < share and self._per_user[uid] < limits.per_user

    def new_client(self, send_now: Send | None = None, uid: int | None = 0) -> Client:
        self._counter += 1
        client = Client(self._counter, send_now, self.limits, uid)
        self.clients.add(client)
        if uid not in self.privileged:
            self._per_user[uid] += 1
            self._others += 1
        return client

    def drop(self, client: Client) -> None:
        if client not in self.clients:
            return
        self.clients.remove(client)
        if client.uid not in self.privileged:
            self._per_user[client.uid] -= 1
            if not self._per_user[client.uid]:
                del self._per_user[client.uid]
            self._others -= 1
        if client.subscribed:
            self._recount()

    def subscription_changed(self) -> None:
        self._recount()

    def publish_lines(self, lines: list[str]) -> None:
        """Live babeld lines for `monitor` clients."""
        if lines and self.monitoring:
            self._pending.extend((False, f"{line}\n") for line in lines)
            self._wake.set()

    def end_monitors(self, my_id: str) -> int:
        """babeld's router id is now `my_id`: each `monitor` client whose header named
        another gets what is published so far (the old babeld's `flush` lines) and is then
        disconnected, as babeld's own socket would be, so that it reconnects and reads the
        new header. Returns how many were ended."""
        self.flush()
        stale = [c for c in self.clients if c.monitor and c.header_id != my_id]
        for client in stale:
            client.close()
        return len(stale)

    def publish_event(self, event: dict[str, Any]) -> None:
        """One JSON event for `watch` clients."""
        if self.watching:
            self._pending.append((True, encode_json(event) + "\n"))
            self._wake.set()

    def flush(self) -> None:
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        lines = "".join(text for is_event, text in pending if not is_event).encode()
        events = "".join(text for is_event, text in pending if is_event).encode()
        both = "".join(text for _, text in pending).encode()
        event_count = sum(1 for is_event, _ in pending if is_event)
        line_count = len(pending) - event_count
        for client in list(self.clients):
            text = (
                both
                if client.monitor and client.watch
                else (lines if client.monitor else events if client.watch else b"")
            )
            if text:
                client.offer(text)
                self.items_out += line_count * client.monitor + event_count * client.watch

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            self.flush()
