"""`monitor` as babeld's own tooling reads it (issue 36): babelweb2 and babelweb take the
header's `my-id` as the node's own router id and hold a table keyed by (kind, handle). A
strict client here does the same and refuses what would mislead them, through a babeld
SIGKILL and a babblerd restart, with real babeld."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from babbler.client import Connection
from babbler.client.errors import Disconnected
from babbler.lab import Lab, Node
from tests.integration.helpers import WAIT, LabFactory, until

pytestmark = pytest.mark.integration

# Neighbours forward a restarted babeld's old announcements for up to ~16 s (BABELD.md):
# long enough to see some of them arrive, short beside the test's bound.
ECHOES = 5.0


def header_id(header: list[str]) -> str:
    return next(line.split()[1] for line in header if line.startswith("my-id "))


def babelds_own_id(node: Node) -> str:
    """What the running babeld itself greets with, on its private control socket."""
    with Connection(node.run_dir / "private" / "babeld.sock") as conn:
        return header_id(conn.header)


class Strict:
    """A `monitor` client as babeld tooling is: its own id from the header; an `add` of a
    known entry, a `change` or `flush` of an unknown one, or a route whose router id is its
    own fails the test."""

    def __init__(self, socket: Path) -> None:
        self.conn = Connection(socket)
        self.my_id = header_id(self.conn.header)
        self.table: dict[tuple[str, str], str] = {}
        self.closed = False
        self.conn.send("monitor")
        self.read_for(None)  # the snapshot, up to its `ok`

    def read_for(self, seconds: float | None) -> None:
        """Apply lines until the snapshot's `ok` (None) or for `seconds`, or until the
        connection ends (`closed`)."""
        deadline = None if seconds is None else time.monotonic() + seconds
        while not self.closed:
            left = WAIT if deadline is None else deadline - time.monotonic()
            if left <= 0:
                return
            self.conn.settimeout(left)
            try:
                line = self.conn.readline()
            except Disconnected:
                self.closed = True
                return
            except TimeoutError:
                return
            if line == "ok":
                if seconds is None:
                    return
                continue
            self.apply(line)

    def apply(self, line: str) -> None:
        verb, kind, handle, *rest = line.split()
        key = (kind, handle)
        if verb == "add":
            assert key not in self.table, f"add of a known entry: {line}"
        else:
            assert key in self.table, f"{verb} of an unknown entry: {line}"
        if verb == "flush":
            del self.table[key]
            return
        self.table[key] = line
        if kind == "route":
            router = rest[rest.index("id") + 1]
            assert router != self.my_id, f"a route from the header's own id: {line}"

    def close(self) -> None:
        self.conn.close()


def babeld_pid(lab: Lab, node: Node) -> int | None:
    pid: int | None = lab.status(node)["babeld"]["pid"]
    return pid


def test_monitor_names_the_babeld_that_runs_through_a_kill_and_a_restart(
    make_lab: LabFactory,
) -> None:
    lab = make_lab(2, "line")
    lab.wait_reachable(WAIT)
    n1 = lab.nodes[0]
    client = Strict(n1.socket)
    try:
        assert client.my_id == babelds_own_id(n1)
        first_id = client.my_id
        assert any(kind == "route" for kind, _ in client.table), client.table
        old_pid = babeld_pid(lab, n1)
        assert old_pid is not None
        os.kill(old_pid, signal.SIGKILL)
        client.read_for(WAIT)
        assert client.closed, "the monitor stayed connected under the old my-id"
        assert client.table == {}, f"entries of the old babeld not flushed: {client.table}"
    finally:
        client.close()

    def restarted() -> bool:  # its pid is known at fork; its control socket comes after
        status = lab.status(n1)
        return status["babeld"]["pid"] not in (None, old_pid) and status["mesh"] == "running"

    until(restarted, what="babeld restarted and babblerd talking to it")
    client = Strict(n1.socket)
    try:
        assert client.my_id == babelds_own_id(n1) and client.my_id != first_id
        lab.wait_reachable(WAIT)
        client.read_for(ECHOES)  # the old babeld's echoes are not this node's own routes
        assert not client.closed
    finally:
        client.close()

    assert n1.pid is not None
    os.kill(n1.pid, signal.SIGTERM)
    lab.wait_exit(n1)
    lab.start(n1)  # babeld starts early, before babblerd serves; then it is adopted
    client = Strict(n1.socket)
    try:
        assert client.my_id == babelds_own_id(n1), "the header names another babeld"
        lab.wait_reachable(WAIT)
        client.read_for(1.0)
        assert not client.closed, "the early babeld was adopted: the same id, no reason to end"
        assert client.my_id == babelds_own_id(n1)
    finally:
        client.close()
