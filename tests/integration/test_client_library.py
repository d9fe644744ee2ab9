"""babbler.client against real daemons: typed status and nodes, `watch_nodes` through a
node leaving and this node's babblerd restarting (reconnect with back-off), the blocking
`watch` ending with Disconnected when asked not to reconnect, and the asyncio example."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from contextlib import aclosing
from pathlib import Path

import trio

from babbler.client import (
    AsyncClient,
    Client,
    Disconnected,
    Event,
    Lost,
    NodeEvent,
    Snapshot,
    ask,
)
from tests.integration.helpers import WAIT, LabFactory, until
from tests.schemas import check_status

EXAMPLE = Path(__file__).parent.parent.parent / "examples" / "watch_nodes.py"


def hops(client: Client) -> dict[str, int | None]:
    return {n.label: n.hops for n in client.nodes() if n.reachable}


async def test_nodes_come_and_go_and_the_client_outlives_a_daemon_restart(
    make_lab: LabFactory,
) -> None:
    lab = make_lab(3, "line")  # n1 - n2 - n3
    n1, _, n3 = lab.nodes
    await trio.to_thread.run_sync(lab.wait_reachable, WAIT)
    client = Client(n1.socket)
    await trio.to_thread.run_sync(
        lambda: until(lambda: hops(client) == {"n2": 1, "n3": 2}, what="n2, n3 by name, hops")
    )
    status = client.status()
    check_status(dict(status.raw))
    assert status.name == "n1" and status.babeld.pid and status.mesh == "running"
    assert {a.interface for a in status.addresses} == {i.name for i in status.interfaces}

    changes: list[NodeEvent] = []
    events: list[Event] = []

    async def follow_nodes() -> None:
        async with aclosing(AsyncClient(n1.socket).watch_nodes()) as stream:
            async for change in stream:
                changes.append(change)

    async def follow_events() -> None:
        async with aclosing(AsyncClient(n1.socket).watch()) as stream:
            async for event in stream:
                events.append(event)

    def told(action: str, name: str) -> bool:
        return any(c.action == action and c.node.label == name for c in changes)

    async def wait_for(check: object, what: str) -> None:
        with trio.fail_after(WAIT):
            while not check():  # type: ignore[operator]
                await trio.sleep(0.05)

    # A blocking watch that does not reconnect: it ends when n1's babblerd stops.
    ended: list[BaseException] = []

    def blocking() -> None:
        try:
            for _ in Client(n1.socket).watch(reconnect=False):
                pass
        except BaseException as error:
            ended.append(error)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(follow_nodes)
        nursery.start_soon(follow_events)
        await wait_for(lambda: told("up", "n2") and told("up", "n3"), "n2 and n3 up")
        assert len(changes) == 2  # the known nodes, once each

        os.kill(n3.pid or 0, signal.SIGTERM)  # n3 leaves the mesh
        await trio.to_thread.run_sync(lab.wait_exit, n3)
        await wait_for(lambda: told("down", "n3"), "n3 down")

        watcher = threading.Thread(target=blocking, daemon=True)
        clients = ask(n1.socket, "status")["clients"]  # the two followers (and nobody else)
        watcher.start()
        await wait_for(lambda: ask(n1.socket, "status")["clients"] > clients, "watcher in")
        snapshots = sum(isinstance(e, Snapshot) for e in events)
        os.kill(n1.pid or 0, signal.SIGTERM)  # this node's babblerd restarts
        await trio.to_thread.run_sync(lab.wait_exit, n1)
        await trio.to_thread.run_sync(lab.start, n1)
        await wait_for(lambda: sum(isinstance(e, Snapshot) for e in events) > snapshots, "resync")
        lost = [e for e in events if isinstance(e, Lost)]
        assert len(lost) == 1 and "closed the connection" in lost[0].reason, lost
        # The new babblerd learns n2's info again: whatever it said meanwhile, the follower
        # ends up with n2 up and n3 down, as the node says.
        n2_id = next(n.node_id for n in status.nodes if n.name == "n2")

        def n2_as_it_is() -> bool:
            last = [c.node for c in changes if c.node.node_id == n2_id][-1]
            return last.reachable and last.name == "n2"

        await wait_for(lambda: hops(client) == {"n2": 1}, "n2 known again")
        await wait_for(n2_as_it_is, "the follower's n2 reachable and named")
        nursery.cancel_scope.cancel()

    watcher.join(timeout=WAIT)
    assert len(ended) == 1 and isinstance(ended[0], Disconnected), ended


def test_the_asyncio_example_prints_nodes_as_they_come_and_go(make_lab: LabFactory) -> None:
    lab = make_lab(3, "line")
    n1, _, n3 = lab.nodes
    lab.wait_reachable(WAIT)
    client = Client(n1.socket)
    until(lambda: hops(client) == {"n2": 1, "n3": 2}, what="n2, n3 by name")
    example = subprocess.Popen(
        [sys.executable, str(EXAMPLE), "--socket", str(n1.socket)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    watchdog = threading.Timer(WAIT, example.kill)  # a read that never ends fails instead
    watchdog.start()
    try:
        assert example.stdout is not None
        first = [example.stdout.readline().split() for _ in range(2)]
        assert sorted((line[0], line[1]) for line in first) == [("up", "n2"), ("up", "n3")]
        os.kill(n3.pid or 0, signal.SIGTERM)
        lab.wait_exit(n3)
        # n2 and n3 may change first (their infos, their links); then n3 goes down. The
        # watchdog bounds the wait for it.
        later: list[list[str]] = []
        while not later or later[-1][:2] != ["down", "n3"]:
            line = example.stdout.readline().split()
            assert line, ("the example ended", later)
            later.append(line)
        assert "unreachable" in later[-1] and len(later) <= 10, later
    finally:
        watchdog.cancel()
        example.send_signal(signal.SIGINT)
        try:
            _, err = example.communicate(timeout=WAIT)
        finally:  # one that ignored Ctrl-C would watch the next lab of this name
            if example.poll() is None:
                example.kill()
                example.communicate()
    assert example.returncode == 0 and err == "", err
