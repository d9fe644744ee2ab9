"""When the kernel drops link events (ENOBUFS), the Linux backend's next re-read still sees
every link: events are triggers, never the truth. Runs the backend in a namespace with the
smallest event queue the kernel allows, then creates 150 veth pairs at once."""

from __future__ import annotations

import json
import sys

import pytest

from tests.integration.helpers import LabFactory

pytestmark = pytest.mark.integration
PAIRS = 150

PROBE = f"""
import json, socket, subprocess, trio
from babbler.daemon.links.linux import LinuxKernel

async def main():
    kernel = LinuxKernel(events_buffer=1)  # the kernel rounds it up to its minimum
    commands = "\\n".join(
        f"link add va{{i}} type veth peer name vb{{i}}" for i in range({PAIRS})
    )
    # Blocking on purpose: nobody reads events while the kernel queues them.
    subprocess.run(["ip", "-batch", "-"], input=commands, text=True, check=True)
    with trio.move_on_after(2):
        while True:
            await kernel.wait_for_change()
    links = await kernel.read_links()
    print(json.dumps({{"overflows": kernel.events.overflows, "links": sorted(links)}}))

trio.run(main)
"""


def test_dropped_events_are_made_good_by_the_re_read(make_lab: LabFactory) -> None:
    lab = make_lab(1, "line", False)
    node = lab.nodes[0]
    result = lab.exec(node, sys.executable, "-c", PROBE, timeout=120)
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.splitlines()[-1])  # after any log lines
    assert seen["overflows"] >= 1  # the fault really happened
    listed = lab.exec(node, "ip", "-o", "link", "show").stdout.splitlines()
    truth = sorted(line.split(":")[1].strip().split("@")[0] for line in listed)
    assert seen["links"] == truth
    assert len(truth) == 2 * PAIRS + 1  # and lo
