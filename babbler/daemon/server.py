"""The public socket: binding it safely, accepting clients, reading their requests and
writing their queued answers. What requests do is in `requests`, fan-out in `fanout`.

Client input is parsed here and never reaches babeld.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import stat
import struct
from collections.abc import Callable
from functools import cache, partial
from pathlib import Path

import structlog
import trio

from babbler.core.errors import EnvironmentProblem
from babbler.core.lines import TOO_LONG
from babbler.daemon.fanout import Client, Hub
from babbler.daemon.linereader import LineReader
from babbler.daemon.requests import MAX_REQUEST, REQUESTS, BadRequest, View, parse_request
from babbler.host.system import LINUX_HOST

log = structlog.get_logger("babbler.server")

# How long a departing client gets to take its last lines (and the too-slow notice).
FAREWELL = 0.5
# The kernel's own cap on pending connections (net.core.somaxconn, 4096 on current Linux):
# clients that connect with a timeout fail at once with EAGAIN when the backlog is full.
BACKLOG = socket.SOMAXCONN
# A client gone: trio's stream says so with its own errors; the writer sends on the raw
# socket, where a peer gone is an OSError.
HUNG_UP = (
    trio.BrokenResourceError,
    trio.ClosedResourceError,
    BrokenPipeError,
    ConnectionResetError,
)
# Linux's struct ucred, what SO_PEERCRED reads: pid, uid, gid.
UCRED = struct.Struct("=iII")


@cache
def _getpeereid() -> Callable[[int], int | None]:
    """getpeereid(3) of libc, for systems without SO_PEERCRED (macOS, the BSDs)."""
    import ctypes

    libc_getpeereid = ctypes.CDLL(None, use_errno=True).getpeereid

    def getpeereid(fd: int) -> int | None:
        uid, gid = ctypes.c_uint32(), ctypes.c_uint32()
        if libc_getpeereid(fd, ctypes.byref(uid), ctypes.byref(gid)) != 0:
            return None
        return uid.value

    return getpeereid


def peer_uid(sock: trio.socket.SocketType) -> int | None:
    """The user of the process at the other end of a Unix socket, as the kernel recorded it
    at connect(); None if the system does not say. Linux: SO_PEERCRED; macOS has none (nor
    `socket.SO_PEERCRED`), but getpeereid(3)."""
    if not LINUX_HOST:
        return _getpeereid()(sock.fileno())
    try:
        ucred = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, UCRED.size)
    except OSError:
        return None
    return int(UCRED.unpack(ucred)[1])


async def _read_requests(stream: trio.SocketStream, client: Client, hub: Hub, view: View) -> None:
    """Answer requests until the client quits or hangs up. While the client's writer is
    behind, its next request waits (fanout.Client.wait_caught_up)."""
    reader = LineReader(stream, MAX_REQUEST)
    while True:
        await client.wait_caught_up()
        raw = await reader.readline()
        if raw is None:
            return
        if raw is TOO_LONG:
            client.offer(f"bad request longer than {MAX_REQUEST} bytes\n")
            continue
        try:
            name = parse_request(raw)
        except BadRequest as error:
            client.offer(f"bad {error}\n")
            continue
        if name is None:
            continue
        request = REQUESTS[name]
        if request.reads_counters:
            await view.read_counters()
        request.handler(client, hub, view)
        if request.ends == "close":
            return


async def _write_queued(stream: trio.SocketStream, client: Client) -> None:
    """Send what is queued, batched. Counts what went out, so that when it is cut short
    (the client too slow, the daemon stopping) the rest of the current line is known."""
    while (data := await client.next_batch()) is not None:
        sent = 0
        try:
            while sent < len(data):
                sent += await stream.socket.send(data[sent:])
        finally:
            if 0 < sent < len(data):  # cut short: is a line left open?
                ends_line = data[sent - 1] == ord("\n")
                client.unfinished = b"" if ends_line else data[sent : data.index(b"\n", sent) + 1]
        client.batch_sent()
    # Closed and all sent: the connection is over, whoever closed it (the client quit, or
    # the daemon ended a `monitor` whose header names a babeld that no longer runs).
    client.scope.cancel()


async def handle_client(hub: Hub, view: View, stream: trio.SocketStream) -> None:
    """Serve one connection until it quits, hangs up, is too slow or the daemon stops."""
    uid = peer_uid(stream.socket)
    if not hub.admits(uid):
        # A client may be gone already (a connect storm while full): nothing to tell it.
        with trio.move_on_after(FAREWELL), contextlib.suppress(*HUNG_UP):
            await stream.send_all(b"no too many clients\n")
        await stream.aclose()
        return
    fd = stream.socket.fileno()  # non-blocking (trio's): a full socket raises BlockingIOError
    client = hub.new_client(lambda data: os.write(fd, data), uid)
    log.debug("client connected", client=client.number, uid=uid)
    try:
        header = view.header()
        client.header_id = next((h[6:] for h in header if h.startswith("my-id ")), None)
        client.offer("".join(f"{line}\n" for line in header))
        with client.scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_write_queued, stream, client)
                await _read_requests(stream, client, hub, view)
                # Quit or hang-up: the writer ends once it has sent what is queued.
                client.close()
                nursery.cancel_scope.deadline = trio.current_time() + FAREWELL
    except* HUNG_UP:
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


class PublicSocket:
    """The bound public socket: bound first (a problem with its path changes nothing else),
    served later, its file removed when serving ends."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._sock, self._inode = bind_public_socket(path)

    async def serve(
        self, hub: Hub, view: View, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Serve until cancelled; the socket file is removed on the way out."""
        try:
            async with trio.open_nursery() as nursery:
                listeners = [trio.SocketListener(self._sock)]
                nursery.start_soon(hub.run)
                handler = partial(handle_client, hub, view)
                await nursery.start(trio.serve_listeners, handler, listeners)
                log.info("serving", socket=str(self.path))
                task_status.started()
        finally:
            self.close()

    def close(self) -> None:
        self._sock.close()
        remove_socket_file(self.path, self._inode)
