"""babeld's routes in the kernel as a trigger (LinuxKernel.wait_for_route_change, which lets
mesh.py dump babeld's table seldom while nothing moves): a route of protocol babel coming or
going wakes it; the host's other routes do not; a flood of them (ENOBUFS) still wakes it."""

from __future__ import annotations

import json
import sys

import pytest

from tests.integration.helpers import LabFactory

pytestmark = pytest.mark.integration

PROBE = """
import json, subprocess, trio
from babbler.daemon.links.linux import LinuxKernel

def ip(*args):
    subprocess.run(["ip", *args], check=True)

async def woken(change, within=2.0):
    kernel = LinuxKernel()
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.to_thread.run_sync, change)
            with trio.move_on_after(within) as waited:
                await kernel.wait_for_route_change()
            return not waited.cancelled_caught
    finally:
        kernel.close()

async def main():
    ip("link", "add", "re0", "type", "veth", "peer", "name", "re1")
    ip("link", "set", "re0", "up")
    ip("addr", "add", "192.0.2.1/24", "dev", "re0")
    babel = ("dev", "re0", "proto", "42")
    seen = {
        "host route": await woken(lambda: ip("route", "add", "198.51.100.0/24", "dev", "re0")),
        "babel route": await woken(lambda: ip("route", "add", "198.51.101.1/32", *babel)),
        "babel route gone": await woken(lambda: ip("route", "del", "198.51.101.1/32", *babel)),
        "babel IPv6 route": await woken(lambda: ip("-6", "route", "add", "fd00::1/128", *babel)),
    }
    print(json.dumps(seen))

trio.run(main)
"""


def test_babelds_routes_wake_it_and_the_hosts_own_do_not(make_lab: LabFactory) -> None:
    lab = make_lab(1, "line", False)  # a namespace of its own; no babblerd runs in it
    node = lab.nodes[0]
    result = lab.exec(node, sys.executable, "-c", PROBE, timeout=60)
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.splitlines()[-1])
    assert seen == {
        "host route": False,
        "babel route": True,
        "babel route gone": True,
        "babel IPv6 route": True,
    }
