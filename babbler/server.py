"""The public socket: the client protocol, and fan-out of live lines and events to clients.

Nobody waits for a client: every client has a bounded queue filled with `send_nowait`; a
client whose queue overflows is sent `no too slow` and disconnected. Each client's writer
batches what is queued into one write. Client input is parsed here and never reaches babeld.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import stat
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, Protocol

import structlog
import trio

from babbler.errors import EnvironmentProblem
from babbler.lines import TOO_LONG, LineReader
from babbler.requests import MAX_REQUEST, BadRequest, help_lines, parse_request
from babbler.selfstats import process_stats

log = structlog.get_logger("babbler.server")

# Queued writes per client before it counts as too slow: about 20 s of a busy mesh's lines.
QUEUE_LIMIT = 4096
# Bytes gathered into one write.
BATCH_BYTES = 65536
# Connections served at once; more are refused with one line.
MAX_CLIENTS = 1024
# How long a departing client gets to take its last lines (and the too-slow notice).
FAREWELL = 0.5
BACKLOG = 128


class View(Protocol):
    """What the server reads from the daemon."""

    def header(self) -> list[str]: ...
    def dump_lines(self) -> list[str]: ...
    def status(self) -> dict[str, Any]: ...


def encode_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=False)


class Client:
    def __init__(self, number: int) -> None:
        self.number = number
        self.queue_in, self.queue_out = trio.open_memory_channel[str](QUEUE_LIMIT)
        self.monitor = False
        self.watch = False
        self.too_slow = False
        self.scope = trio.CancelScope()
        # The rest of a line whose start was written when the writer was cut short: sent
        # before the farewell so the client only ever sees whole lines.
        self.unfinished = b""

    @property
    def subscribed(self) -> bool:
        return self.monitor or self.watch

    def offer(self, text: str) -> None:
        """Queue text for the client; never blocks. Overflow marks it too slow and ends it."""
        if self.too_slow:
            return
        try:
            self.queue_in.send_nowait(text)
        except trio.WouldBlock:
            self.too_slow = True
            self.scope.cancel()
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            pass


class Hub:
    """The set of connected clients, and fan-out to the subscribed ones.

    Published lines and events are gathered and flushed together, one queue item per client
    per flush: babeld writes lines in bursts, and one item per line would overflow every
    queue from scheduling alone. `run` flushes whenever something was published; `flush` is
    also called before a client subscribes, so its snapshot and the stream never overlap.
    """

    def __init__(self, on_subscribers_changed: Callable[[], None] = lambda: None) -> None:
        self.clients: set[Client] = set()
        self._counter = 0
        self._on_change = on_subscribers_changed
        self._pending: list[tuple[bool, str]] = []  # (is a watch event, text with newline)
        self._wake = trio.Event()

    @property
    def subscribers(self) -> int:
        return sum(1 for c in self.clients if c.subscribed)

    def new_client(self) -> Client:
        self._counter += 1
        client = Client(self._counter)
        self.clients.add(client)
        return client

    def drop(self, client: Client) -> None:
        was = client.subscribed
        self.clients.discard(client)
        if was:
            self._on_change()

    def subscription_changed(self) -> None:
        self._on_change()

    def publish_lines(self, lines: list[str]) -> None:
        """Live babeld lines for `monitor` clients."""
        if lines and any(c.monitor for c in self.clients):
            self._pending.extend((False, f"{line}\n") for line in lines)
            self._wake.set()

    def publish_event(self, event: dict[str, Any]) -> None:
        """One JSON event for `watch` clients."""
        if any(c.watch for c in self.clients):
            self._pending.append((True, encode_json(event) + "\n"))
            self._wake.set()

    def flush(self) -> None:
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        lines = "".join(text for is_event, text in pending if not is_event)
        events = "".join(text for is_event, text in pending if is_event)
        both = "".join(text for _, text in pending)
        for client in list(self.clients):
            text = (
                both
                if client.monitor and client.watch
                else (lines if client.monitor else events if client.watch else "")
            )
            if text:
                client.offer(text)

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            self.flush()


def _answer(client: Client, hub: Hub, view: View, name: str) -> bool:
    """Queue the answer to one request. Returns False when the client asked to quit."""
    if name == "quit":
        return False
    if name == "dump":
        client.offer("".join(f"{line}\n" for line in view.dump_lines()) + "ok\n")
    elif name == "monitor":
        if not client.monitor:
            # Snapshot and subscription happen with no await between: nothing is missed,
            # and nothing published before the snapshot is sent again after it.
            hub.flush()
            client.offer("".join(f"{line}\n" for line in view.dump_lines()) + "ok\n")
            client.monitor = True
            hub.subscription_changed()
        else:
            client.offer("ok\n")
    elif name == "unmonitor":
        was = client.monitor
        client.monitor = False
        client.offer("ok\n")
        if was:
            hub.subscription_changed()
    elif name == "status":
        client.offer(encode_json(view.status()) + "\nok\n")
    elif name == "watch":
        if client.watch:
            client.offer("bad already watching\n")
        else:
            hub.flush()
            client.offer(encode_json({"type": "snapshot", "status": view.status()}) + "\n")
            client.watch = True
            hub.subscription_changed()
    elif name == "stats":
        client.offer(encode_json(process_stats(len(hub.clients))) + "\nok\n")
    elif name == "help":
        client.offer("".join(f"{line}\n" for line in help_lines()) + "ok\n")
    return True


async def _read_requests(stream: trio.SocketStream, client: Client, hub: Hub, view: View) -> None:
    reader = LineReader(stream, MAX_REQUEST)
    while (raw := await reader.readline()) is not None:
        if raw is TOO_LONG:
            client.offer(f"bad request longer than {MAX_REQUEST} bytes\n")
            continue
        try:
            name = parse_request(raw)
        except BadRequest as error:
            client.offer(f"bad {error}\n")
            continue
        if name is not None and not _answer(client, hub, view, name):
            return


async def _write_queued(stream: trio.SocketStream, client: Client) -> None:
    """Send what is queued, batched. Counts what went out, so that when it is cut short
    (the client too slow, the daemon stopping) the rest of the current line is known."""
    async for first in client.queue_out:
        batch, size = [first], len(first)
        while size < BATCH_BYTES:
            try:
                more = client.queue_out.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel):  # closed: send what is here, then end
                break
            batch.append(more)
            size += len(more)
        data = "".join(batch).encode()
        sent = 0
        try:
            while sent < len(data):
                sent += await stream.socket.send(data[sent:])
        finally:
            if 0 < sent < len(data) and data[sent - 1] != ord("\n"):
                client.unfinished = data[sent : data.index(b"\n", sent) + 1]


async def handle_client(hub: Hub, view: View, stream: trio.SocketStream) -> None:
    """Serve one connection until it quits, hangs up, is too slow or the daemon stops."""
    if len(hub.clients) >= MAX_CLIENTS:
        with trio.move_on_after(FAREWELL):
            await stream.send_all(b"no too many clients\n")
        await stream.aclose()
        return
    client = hub.new_client()
    log.debug("client connected", client=client.number)
    try:
        client.offer("".join(f"{line}\n" for line in view.header()))
        with client.scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_write_queued, stream, client)
                await _read_requests(stream, client, hub, view)
                # Quit or hang-up: the writer ends once it has sent what is queued.
                client.queue_in.close()
                nursery.cancel_scope.deadline = trio.current_time() + FAREWELL
    except* (
        trio.BrokenResourceError,
        trio.ClosedResourceError,
        BrokenPipeError,  # the writer sends on the raw socket: a peer gone is an OSError there
        ConnectionResetError,
    ):
        pass  # the client hung up: normal
    except* Exception:
        log.exception("client handler failed", client=client.number)
    finally:
        hub.drop(client)
        if client.too_slow:
            log.warning("client too slow, disconnected", client=client.number)
            with trio.move_on_after(FAREWELL) as scope:
                scope.shield = True
                with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                    await stream.send_all(client.unfinished + b"no too slow\n")
        with trio.CancelScope(shield=True):
            await stream.aclose()
        log.debug("client gone", client=client.number)


def bind_public_socket(path: Path) -> tuple[trio.socket.SocketType, int]:
    """Bind the public socket at `path` (mode 0666). If something answers there already,
    refuse; a dead socket, or anything else left at the path, is removed without following
    it. Returns the listening socket and the socket file's inode. Raises EnvironmentProblem."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        info = None
    if info is not None:
        if stat.S_ISSOCK(info.st_mode):
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                probe.connect(str(path))
                raise EnvironmentProblem(f"another babblerd is serving {path}; stop it first")
            except (ConnectionRefusedError, FileNotFoundError):
                pass
            finally:
                probe.close()
        path.unlink()
    raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        raw.bind(str(path))
        os.chmod(path, 0o666)  # bind() follows the umask
        raw.listen(BACKLOG)
    except OSError as error:
        raw.close()
        if error.errno == errno.ENAMETOOLONG or len(str(path)) >= 108:
            raise EnvironmentProblem(f"socket path too long (max 107 bytes): {path}") from None
        raise EnvironmentProblem(f"cannot serve {path}: {error.strerror or error}") from None
    return trio.socket.from_stdlib_socket(raw), path.lstat().st_ino


def remove_socket_file(path: Path, inode: int) -> None:
    """Remove the socket file if it is still ours (not replaced by a later daemon)."""
    with contextlib.suppress(FileNotFoundError):
        if path.lstat().st_ino == inode:
            path.unlink()


async def serve(
    path: Path,
    hub: Hub,
    view: View,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the public socket until cancelled; the socket file is removed on the way out."""
    sock, inode = bind_public_socket(path)
    try:
        async with trio.open_nursery() as nursery:
            listeners = [trio.SocketListener(sock)]
            nursery.start_soon(hub.run)
            await nursery.start(trio.serve_listeners, partial(handle_client, hub, view), listeners)
            log.info("serving", socket=str(path))
            task_status.started()
    finally:
        remove_socket_file(path, inode)
