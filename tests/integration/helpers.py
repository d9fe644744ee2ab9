"""What the integration tests share: bounded waits, reading a node's addresses and its
daemon's stats, running a command as an unprivileged user. Test modules import from here,
never from each other."""

from __future__ import annotations

import json
from collections.abc import Callable
from ipaddress import IPv6Address

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
