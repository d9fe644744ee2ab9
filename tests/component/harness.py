"""Run a real Daemon in-process against a FakeKernel and the fake babeld program, and talk
to it through its real Unix socket."""

from __future__ import annotations

import os
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import trio

from babbler.core.config import Config
from babbler.core.lines import TOO_LONG
from babbler.core.links import Link
from babbler.daemon import paths, routerids
from babbler.daemon.babeld.launch import launch_for, write_private
from babbler.daemon.cli import load_config
from babbler.daemon.early import Early
from babbler.daemon.ipv4 import Ipv4
from babbler.daemon.lifecycle import Daemon, Tunables
from babbler.daemon.linereader import LineReader
from babbler.daemon.nodeid import NodeId
from babbler.daemon.spawn import process_name, spawn
from tests.fakes.kernel import FakeKernel

FAKE = Path(__file__).parent.parent / "fakes" / "fake_babeld.py"
NODE = NodeId(0x1A2B3C4D5E6F, "flag")
WAIT = 10.0  # generous: the machine is shared


def veth(name: str, index: int) -> Link:
    return Link(name, index, kind="veth", up=True, link_local=True)


def alive(pid: int) -> bool:
    return process_name(pid) is not None


async def eventually(check: Callable[[], object], timeout: float = WAIT, what: str = "") -> None:
    with trio.move_on_after(timeout):
        while not check():
            await trio.sleep(0.01)
        return
    raise AssertionError(f"not within {timeout} s: {what or check}")


class Fake:
    """The fake babeld's side of things: its log, the pids it ran."""

    def __init__(self, base: Path) -> None:
        self.log = base / "fake.log"
        self.log.touch()
        self.wrapper = base / "babeld"  # the fake babeld's program
        self._kept: list[str] | None = None
        self.early_pid: int | None = None  # the babeld spawned before the daemon, if any

    def keep(self) -> None:
        """Read the log into memory before its directory goes."""
        self._kept = self.lines()

    def lines(self) -> list[str]:
        if self._kept is not None:
            return self._kept
        return self.log.read_text().splitlines()

    def starts(self) -> list[tuple[int, float]]:
        return [
            (int(x.split()[1]), float(x.split()[2])) for x in self.lines() if x.startswith("start ")
        ]

    def requests(self) -> list[str]:
        return [x.removeprefix("request ") for x in self.lines() if x.startswith("request ")]


class Client:
    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.reader = LineReader(stream, 1 << 20)

    async def readline(self, timeout: float = WAIT) -> str | None:
        with trio.fail_after(timeout):
            raw = await self.reader.readline()
        assert raw is not TOO_LONG
        return None if raw is None else raw.decode()

    async def send(self, text: str | bytes) -> None:
        await self.stream.send_all(text if isinstance(text, bytes) else f"{text}\n".encode())

    async def until_status(self) -> list[str]:
        """Data lines up to and excluding the next ok/no/bad; the status line is appended."""
        lines = []
        while True:
            line = await self.readline()
            assert line is not None, "connection closed"
            lines.append(line)
            if line == "ok" or line.startswith(("no", "bad")):
                return lines

    async def request(self, text: str) -> list[str]:
        await self.send(text)
        return await self.until_status()

    async def aclose(self) -> None:
        await self.stream.aclose()


_opened: list[Client] = []  # closed when the daemon of `running` stops


async def connect(path: Path, read_header: bool = True) -> Client:
    sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    await sock.connect(str(path))
    client = Client(trio.SocketStream(sock))
    _opened.append(client)
    if read_header:
        assert (await client.until_status())[-1] == "ok"
    return client


@asynccontextmanager
async def running(
    kernel: FakeKernel,
    fake_mode: str = "normal",
    chatter: str | None = None,
    real_changes: bool = False,
    early_on: str | None = None,
    early_settings: dict[str, Any] | None = None,
    tunables: Tunables | None = None,
    node: NodeId = NODE,
    **settings: Any,
) -> AsyncIterator[tuple[Daemon, Fake]]:
    """A daemon on a fake kernel with the fake babeld. `early_on`: babeld is spawned first
    on that interface, as babblerd's early start does, for the daemon to adopt (or not);
    `early_settings`: settings that were different when it was (a config since changed).
    `node`: its node id (the fake babeld's neighbour announces node aaaabbbbcccc)."""
    base = Path(tempfile.mkdtemp(prefix="bbc", dir="/tmp"))  # short: socket paths < 108 bytes
    fake = Fake(base)
    wrapper = fake.wrapper
    env = {"FAKE_BABELD_MODE": fake_mode, "FAKE_BABELD_LOG": str(fake.log)}
    if chatter:
        env["FAKE_BABELD_CHATTER"] = chatter
    if real_changes:  # every chatter line a real change (a sequence number as its rtt)
        env["FAKE_BABELD_STAMP"] = str(base / "stamps")
    exports = "".join(f"export {k}='{v}'\n" for k, v in env.items())
    wrapper.write_text(f'#!/bin/sh\n{exports}exec {sys.executable} {FAKE} "$@"\n')
    wrapper.chmod(0o755)
    settings.setdefault("mode", "on-demand")  # idle until a test subscribes or asks for always
    settings.setdefault("info_port", 0)  # no node info listener in the host's namespace
    settings.setdefault("bench", "off")  # nor a bench responder
    settings.setdefault("interface", ("v*",))
    config = replace(
        Config(run_dir=base / "run", state_dir=base / "state", babeld=str(wrapper)), **settings
    )
    paths.prepare(config.run_dir, config.private_dir, config.state_dir)
    early = None
    if early_on is not None:
        # As early.py: the one launch function, on the early start's view of the links.
        early_config = replace(config, **(early_settings or {}))
        ipv4 = Ipv4.load(early_config.ipv4_prefix, config.state_dir, node.value)
        router_id = routerids.take(config.state_dir)
        link = kernel.links.get(early_on)
        launch = launch_for(early_config, None, ipv4, node.value, router_id, early_on, link)
        write_private(launch.files.config, launch.config_text())
        early = Early(launch, spawn(launch.args()), time.monotonic())
        fake.early_pid = early.popen.pid
    reload = lambda: load_config({}, config.config)  # noqa: E731
    daemon = Daemon(config, kernel, node, reload, early=early, tunables=tunables)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(daemon.run)
            yield daemon, fake
            nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            while _opened:
                await _opened.pop().aclose()
        if early is not None:
            early.stop()
        fake.keep()
        for pid, _ in fake.starts():
            if alive(pid):
                os.kill(pid, 9)
        shutil.rmtree(base, ignore_errors=True)
