"""What the integration tests share: bounded waits, reading a node's addresses and its
daemon's stats, running a command as an unprivileged user. Test modules import from here,
never from each other."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from ipaddress import IPv6Address
from pathlib import Path
from typing import Any

from babbler.client import Connection
from babbler.core.addressing import MESH_PREFIX
from babbler.lab import Lab, Node, wait
from tests.needs import tool

LabFactory = Callable[..., Lab]
WAIT = 60.0  # generous bounded waits: the machine is shared
NOBODY = 65534


def until(check: Callable[[], object], timeout: float = WAIT, what: str = "") -> None:
    if not wait.until(check, timeout):
        raise AssertionError(f"not within {timeout} s: {what}")


def mesh_addresses(lab: Lab, node_index: int) -> set[IPv6Address]:
    out = lab.exec(lab.nodes[node_index - 1], "ip", "-6", "-o", "addr", "show").stdout
    found = {
        IPv6Address(word.split("/")[0])
        for line in out.splitlines()
        for word in line.split()
        if "/" in word and ":" in word
    }
    return {a for a in found if a in MESH_PREFIX}


def batch(lab: Lab, node: Node, commands: list[str]) -> None:
    result = lab.exec(node, "sh", "-c", "ip -batch - <<'EOF'\n" + "\n".join(commands) + "\nEOF")
    assert result.returncode == 0, result.stderr


def stats(node: Node) -> dict[str, int]:
    with Connection(node.socket) as conn:
        value: dict[str, int] = json.loads(conn.request("stats")[0])
    return value


def as_nobody(*caps: str) -> list[str]:
    setpriv = tool("setpriv", "util-linux")
    args = [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    if caps:
        wanted = ",".join(f"+{cap}" for cap in caps)
        args += [f"--inh-caps={wanted}", f"--ambient-caps={wanted}"]
    return args


def sysctl(lab: Lab, node: Node, name: str) -> str:
    """A kernel setting inside a node's namespace (`net.ipv6.conf.all.forwarding`)."""
    return lab.exec(node, "sysctl", "-n", name).stdout.strip()


ECHO = Path(__file__).with_name("echo.py")
ECHO_PORT = "7007"


def talk_through_a_pull(
    lab: Lab, source: Node, target_node: Node, target: str, pull: Callable[[str], None],
    plug: Callable[[str], None],
) -> dict[str, Any]:  # fmt: skip
    """A TCP connection from `source` to `target` (an address of `target_node`) for 8 s,
    an echo every 50 ms (echo.py); 2 s in, the link carrying it at `source` is pulled
    (`pull(link)`) for 3 s, then plugged back. What echo.py measured (sent, echoed,
    max_gap_s, error)."""
    echo = [sys.executable, str(ECHO)]
    server = subprocess.Popen(["ip", "netns", "exec", target_node.netns, *echo, "serve", ECHO_PORT])
    try:
        listening = lambda: ECHO_PORT in lab.exec(target_node, "ss", "-ltn").stdout  # noqa: E731
        until(listening, what="the echo listening")
        route = lab.exec(source, "ip", "route", "get", target).stdout.split()
        carrying = route[route.index("dev") + 1]
        talk = subprocess.Popen(
            ["ip", "netns", "exec", source.netns, *echo, "talk", target, ECHO_PORT, "8"],
            stdout=subprocess.PIPE,
            text=True,
        )
        time.sleep(2)  # the scene: the connection runs, then its cable goes for 3 s
        pull(carrying)
        time.sleep(3)
        plug(carrying)
        out, _ = talk.communicate(timeout=60)
    finally:
        server.kill()
        server.wait()
    result: dict[str, Any] = json.loads(out)
    result["link"] = carrying
    return result
