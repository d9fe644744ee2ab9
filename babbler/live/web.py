"""`babblerctl web`: the mesh as a page, served by the unprivileged babblerctl from babblerd's
public socket (issue 34 item 3).

What it owns: the one live view every open page shares (`Hub`: while a page is open it
follows `watch`, and each second asks `status` and `counters`; with no page open it asks
nothing), binding the `--listen` address (read, and the checks on each request, in
babbler.live.listen), and the routes: `/` and `/static/...` (the browser code in
babbler/live/static/, shipped in the package: no CDN), `/api/mesh` (babbler.live.mesh's model
as JSON), `/events` (server-sent events, one per refresh), `/metrics` (`babblerctl metrics`'
Prometheus text, babbler.live.metrics).
The page sets every value from the wire as text (static/mesh.js), never as markup.

Starlette and hypercorn (its trio worker) are imported when the command runs, not with this
module: `babblerctl --help` and the other commands stay quick.
"""

from __future__ import annotations

import errno
import json
import signal
import socket
import time
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import aclosing, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from babbler.client.aio import AsyncClient
from babbler.client.errors import ClientError, ProtocolError
from babbler.client.sync import one_json
from babbler.core.errors import BabblerError
from babbler.ctl.options import socket_of, socket_option
from babbler.live import mesh, metrics
from babbler.live.listen import DEFAULT_LISTEN, Listen, parse_allow_host, parse_listen, refusal
from babbler.ui.command import run_command

if TYPE_CHECKING:
    import trio

TICK = 1.0  # s between refreshes (status and counters) while a page is open
SETTLE = 0.1  # s a watch event waits for those that come with it before the refresh it asks
LINGER = 3.0  # s the feed outlives the last page: a reload comes back within it
LOG_KEEP = 50  # changes the page's list of events holds
ASK_TIMEOUT = 5.0  # s for babblerd to answer one request
STATIC = Path(__file__).with_name("static")
# The page may load only its own code: a value that did reach markup would still not run.
HEADERS = {
    "Content-Security-Policy": "default-src 'self'; object-src 'none'; base-uri 'none'; "
    "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
LISTEN_HELP = (
    "ADDRESS:PORT to serve on [default: 127.0.0.1:8770]; IPv6 in brackets: [::1]:8770. "
    "Anything but loopback exposes the page, /api/mesh, /events and /metrics to anyone who "
    "can reach the port: they read the mesh's state (names, addresses, cables, rates). "
    "There is no authentication. Off loopback it answers only requests addressed to that "
    "address (http://ADDRESS:PORT/; for 0.0.0.0 or [::], to any address but no name) or to "
    "an --allow-host name."
)
ALLOW_HOST_HELP = (
    "A DNS name users reach the page by (mesh.lan), answered besides the --listen address "
    "(or the loopback names); repeat for more. Any other name is refused (421): a web site "
    "could point its own name at this address and read the mesh (DNS rebinding)."
)


def check_port(listen: Listen) -> None:
    """Fail early, in one line, when the address cannot be listened on (hypercorn's own
    error is a traceback). Raises BabblerError."""
    family = socket.AF_INET6 if listen.host.version == 6 else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as hypercorn binds
        try:
            probe.bind((str(listen.host), listen.port))
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                raise BabblerError(
                    f"cannot listen on {listen.bind}: the port is in use "
                    "(another babblerctl web?); pick another with --listen"
                ) from None
            if error.errno == errno.EADDRNOTAVAIL:
                raise BabblerError(
                    f"cannot listen on {listen.bind}: no interface here has {listen.host}"
                ) from None
            raise BabblerError(f"cannot listen on {listen.bind}: {error.strerror}") from None


# -- the live view the pages share ------------------------------------------------------------


def _clock(at: float, now: float) -> str:
    """A monotonic moment as the local wall clock shows it."""
    return time.strftime("%H:%M:%S", time.localtime(time.time() - (now - at)))


class Hub:
    """The one view every open page shares. While a page follows (`follow`), it watches
    babblerd (each event asks a refresh) and refreshes every TICK: `status` and `counters`,
    through babbler.live.mesh, into one JSON payload. With no page open for LINGER it
    stops: no request reaches babblerd, and babblerd asks no node for counters."""

    def __init__(self, socket_path: Path) -> None:
        import trio

        self.socket_path = socket_path
        self.client = AsyncClient(socket_path, ASK_TIMEOUT)
        self.viewers = 0
        self.version = 0
        self.payload = b""
        self.changed = trio.Event()
        self._wanted = trio.Event()
        self._poked = trio.Event()
        self._live = mesh.Live()
        self._log: deque[mesh.Change] = deque(maxlen=LOG_KEEP)
        self._status: dict[str, Any] | None = None
        self._error: str | None = None

    async def run(self, *, task_status: trio.TaskStatus[None]) -> None:
        """Follow babblerd while any page is open; idle otherwise. Runs until cancelled."""
        import trio

        task_status.started()
        while True:
            await self._wanted.wait()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._watch)
                nursery.start_soon(self._tick)
                idle_since: float | None = None
                while True:
                    await trio.sleep(TICK)
                    if self.viewers:
                        idle_since = None
                    elif idle_since is None:
                        idle_since = trio.current_time()
                    elif trio.current_time() - idle_since >= LINGER:
                        break
                nursery.cancel_scope.cancel()
            self._wanted = trio.Event()
            if self.viewers:
                self._wanted.set()

    async def _watch(self) -> None:
        """Each `watch` event (and a lost babblerd) asks for a refresh. The client's watch
        reconnects by itself; a line it cannot read starts it again a TICK later."""
        import trio

        while True:
            try:
                async with aclosing(self.client.watch()) as events:
                    async for _event in events:
                        self._poked.set()
            except ClientError:
                self._poked.set()
                await trio.sleep(TICK)

    async def _tick(self) -> None:
        """A refresh each TICK, and SETTLE after an event; counters once a TICK only (a
        reading per event would add nothing, and events may come many a second)."""
        import trio

        counted = float("-inf")
        while True:
            with trio.move_on_after(TICK):
                await self._poked.wait()
                await trio.sleep(SETTLE)
            self._poked = trio.Event()
            now = trio.current_time()
            counting = now - counted >= TICK - SETTLE
            if counting:
                counted = now
            await self.refresh(counters=counting)

    async def refresh(self, counters: bool = True) -> None:
        """Ask babblerd, rebuild the view, wake every page. A failure is shown on the page,
        the last view kept."""
        import trio

        read: dict[str, Any] | None = None
        try:
            self._status = one_json(await self.client.request("status"), "status")
            if counters:
                with suppress(ProtocolError):  # an older babblerd: no `counters`, no rates
                    read = one_json(await self.client.request("counters"), "counters")
            self._error = None
        except ClientError as error:
            self._error = str(error)
        if self._status is None:
            self._send({"mesh": None, "log": [], "error": self._error})
            return
        now = trio.current_time()
        shown = self._live.step(self._status, read, now)
        for change in reversed(shown.changes):  # oldest first
            if change not in self._log:
                self._log.append(change)
        log = [
            {"time": _clock(change.at, now), "kind": change.kind, "text": change.text}
            for change in reversed(self._log)
        ]
        self._send({"mesh": mesh.as_json(shown), "log": log, "error": self._error})

    def _send(self, payload: dict[str, Any]) -> None:
        import trio

        payload["socket"] = str(self.socket_path)
        self.payload = json.dumps(payload, separators=(",", ":")).encode()
        self.version += 1
        changed, self.changed = self.changed, trio.Event()
        changed.set()

    async def current(self) -> bytes:
        """The payload now: the live one while a page is open, else read once."""
        if not self.viewers or not self.payload:
            await self.refresh()
        return self.payload

    async def follow(self) -> AsyncGenerator[bytes, None]:
        """Each new payload, the current one first, for as long as the page stays."""
        self.viewers += 1
        self._wanted.set()
        try:
            if not self.payload:
                await self.refresh()
            seen = -1
            while True:
                changed = self.changed
                if seen == self.version:
                    await changed.wait()
                seen = self.version
                yield self.payload
        finally:
            self.viewers -= 1


# -- the server ------------------------------------------------------------------------------

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def guarded(app: ASGIApp, listen: Listen, names: frozenset[str]) -> ASGIApp:
    """`app` behind babbler.live.listen's `refusal` (a Host a rebound name would carry, a
    request from another site's page), with HEADERS on every answer."""
    extra = [(k.lower().encode(), v.encode()) for k, v in HEADERS.items()]

    async def guard(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        headers: dict[str, str] = {}
        for name, value in scope.get("headers") or []:
            key = name.decode("latin-1").lower()  # a repeated header: both, so neither is safe
            text = value.decode("latin-1")
            headers[key] = f"{headers[key]}, {text}" if key in headers else text
        refused = refusal(scope["method"], scope["path"], headers, listen, names)
        if refused is not None:
            status, body = refused
            plain = [(b"content-type", b"text/plain; charset=utf-8"), *extra]
            await send({"type": "http.response.start", "status": status, "headers": plain})
            await send({"type": "http.response.body", "body": body.encode()})
            return

        async def with_headers(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        await app(scope, receive, with_headers)

    return guard


def build_app(hub: Hub, listen: Listen, names: frozenset[str]) -> ASGIApp:
    """The routes (module docstring), as a Starlette app."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import FileResponse, Response, StreamingResponse
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    async def page(_request: Request) -> Response:
        return FileResponse(STATIC / "index.html", media_type="text/html; charset=utf-8")

    async def api_mesh(_request: Request) -> Response:
        return Response(await hub.current(), media_type="application/json")

    async def events(_request: Request) -> Response:
        async def stream() -> AsyncIterator[bytes]:
            async for payload in hub.follow():
                yield b"data: " + payload + b"\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream")

    async def prometheus(_request: Request) -> Response:
        import trio

        body = await trio.to_thread.run_sync(metrics.exposition, hub.socket_path)
        return Response(body, media_type=metrics.CONTENT_TYPE)

    routes = [
        Route("/", page),
        Route("/api/mesh", api_mesh),
        Route("/events", events),
        Route("/metrics", prometheus),
        Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
    ]
    return guarded(Starlette(routes=routes), listen, names)


async def serve(socket_path: Path, listen: Listen, names: frozenset[str]) -> None:
    """Serve until Ctrl-C or SIGTERM, on hypercorn's trio worker."""
    import trio
    from hypercorn.config import Config
    from hypercorn.trio import serve as hypercorn_serve

    config = Config()
    config.bind = [listen.bind]
    config.accesslog = None
    config.errorlog = None  # a dropped page is no error; a failure to serve raises
    config.graceful_timeout = 1.0  # an open page's stream never ends by itself
    hub = Hub(socket_path)
    async with trio.open_nursery() as nursery:
        await nursery.start(hub.run)
        app = build_app(hub, listen, names)
        await hypercorn_serve(app, config, shutdown_trigger=_stop_asked)  # type: ignore[arg-type]
        nursery.cancel_scope.cancel()


async def _stop_asked() -> None:
    """Returns on Ctrl-C or SIGTERM: hypercorn then ends its connections (open pages'
    streams included) within its graceful_timeout."""
    import trio

    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _signal in signals:
            return


@click.command("web")
@socket_option
@click.option("--listen", default=DEFAULT_LISTEN, metavar="ADDRESS:PORT", help=LISTEN_HELP)
@click.option("--allow-host", "allow_hosts", multiple=True, metavar="NAME", help=ALLOW_HOST_HELP)
@click.pass_context
def command(
    ctx: click.Context, socket_path: Path | None, listen: str, allow_hosts: tuple[str, ...]
) -> None:
    """Serve a live page of the mesh: every node and cable drawn, each cable's speed and
    its rate each way now (busy cables thicker), this node marked; click a node for its
    addresses, cables, version and info age; the last changes listed. It reads babblerd's
    public socket (no root needed) and asks nothing while no page is open.

    Besides the page: /api/mesh (the model as JSON), /events (its server-sent events),
    /metrics (what `babblerctl metrics` prints, for Prometheus).

    On loopback only by default; for a remote node forward the port over ssh
    (ssh -L 8770:127.0.0.1:8770 NODE, then open http://127.0.0.1:8770/ here). Ctrl-C ends it.

    A request another web site's page makes (a browser's Sec-Fetch-Site cross-site or
    same-site, or an Origin not the page's own) is refused (403): a site open in the browser
    cannot keep babblerctl following. Following a link to the page itself still works, and
    curl or Prometheus, which send neither header, are served.
    """

    def go() -> None:
        import trio

        where = parse_listen(listen)
        names = frozenset(parse_allow_host(name) for name in allow_hosts)
        check_port(where)
        path = socket_of(ctx, socket_path)
        trio.run(_first_status, path)
        exposed = "" if where.loopback else " (not loopback: anyone who can reach it reads it)"
        click.echo(f"babblerctl web: serving {where.url}{exposed}; Ctrl-C ends", err=True)
        trio.run(serve, path, where, names)

    run_command("babblerctl", go)


async def _first_status(socket_path: Path) -> None:
    """babblerd answers at the socket (a wrong --socket fails here, in one line)."""
    await AsyncClient(socket_path, ASK_TIMEOUT).request("status")
