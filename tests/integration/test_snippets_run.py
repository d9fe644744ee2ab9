"""The README's and docs/client.md's Python snippets run as they stand against a real node
(BABBLER_SOCKET names it, as `babbler-lab exec` does): the blocking one prints the status
and the other node and ends, the watching ones print it `up` and follow on. And the example
program says a node in the down hold has no route, not "metric None via None"."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import pytest

from babbler.client import Client
from tests.integration.helpers import WAIT, LabFactory, until
from tests.snippets import EXAMPLE, python_snippets

pytestmark = pytest.mark.integration


def test_every_python_snippet_runs_against_a_lab_node(make_lab: LabFactory) -> None:
    lab = make_lab(2, "line")
    n1, _ = lab.nodes
    lab.wait_reachable(WAIT)
    until(lambda: [n.name for n in Client(n1.socket).nodes()] == ["n2"], what="n2 by name")
    env = {**os.environ, "BABBLER_SOCKET": str(n1.socket)}
    for where, code in python_snippets():
        snippet = subprocess.Popen(
            [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env=env,
        )  # fmt: skip
        watchdog = threading.Timer(WAIT, snippet.kill)  # a read that never ends fails instead
        watchdog.start()
        try:
            assert snippet.stdout is not None
            said: list[str] = []
            while not said or "n2" not in said[-1].split():  # the watchdog bounds it
                said.append(snippet.stdout.readline())
                assert said[-1], (where, "ended before it named n2", said)
            try:  # the blocking one ends by itself; the watching ones follow until stopped
                _, err = snippet.communicate(timeout=5)
                assert snippet.returncode == 0 and err == "", (where, err)
            except subprocess.TimeoutExpired:
                assert "watch" in code, (where, "runs on and on")
        finally:
            watchdog.cancel()
            if snippet.poll() is None:
                snippet.kill()
                snippet.communicate()


def test_the_example_says_no_route_during_the_down_hold(make_lab: LabFactory) -> None:
    lab = make_lab(2, "line")
    n1, n2 = lab.nodes
    lab.wait_reachable(WAIT)
    until(lambda: [n.name for n in Client(n1.socket).nodes()] == ["n2"], what="n2 by name")
    example = subprocess.Popen(
        [sys.executable, str(EXAMPLE), "--socket", str(n1.socket)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    watchdog = threading.Timer(WAIT, example.kill)
    watchdog.start()
    try:
        assert example.stdout is not None
        assert example.stdout.readline().split()[:2] == ["up", "n2"]
        os.kill(n2.pid or 0, signal.SIGTERM)  # n2 leaves: held for the down hold, then down
        lab.wait_exit(n2)
        later: list[str] = []
        while not later or not later[-1].startswith("down"):
            line = example.stdout.readline()
            assert line, ("the example ended", later)
            later.append(line.rstrip())
        assert not any("None" in line for line in later), later
        held = [line for line in later if line.startswith("changed  n2")]
        assert held and held[-1].endswith(
            "no route now: down unless one comes back within the down hold"
        ), later
        assert later[-1].endswith("unreachable"), later
    finally:
        watchdog.cancel()
        example.send_signal(signal.SIGINT)
        try:
            example.communicate(timeout=WAIT)
        finally:
            if example.poll() is None:
                example.kill()
                example.communicate()
