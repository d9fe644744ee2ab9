"""Real daemon output against docs/schema: status, and every watch line through a link
appearing and a babeld crash (which flushes and re-adds every table entry)."""

from __future__ import annotations

import json
import os
import signal
from typing import Any

import trio

from tests.component.harness import WAIT, connect, eventually, running, veth
from tests.fakes.kernel import FakeKernel
from tests.schemas import check_status, check_watch


async def test_status_and_every_watch_line_match_the_schemas() -> None:
    kernel = FakeKernel(veth("v1x2", 2))
    async with running(kernel, mode="always") as (daemon, fake):
        await eventually(lambda: daemon.mesh.state == "running")
        asker = await connect(daemon.config.socket_path)
        check_status(json.loads((await asker.request("status"))[0]))
        watch = await connect(daemon.config.socket_path)
        await watch.send("watch")
        kernel.set_link(veth("v1x3", 3))
        await eventually(lambda: "v1x3" in daemon.mesh.told, what="v1x3 told")
        os.kill(fake.starts()[-1][0], signal.SIGKILL)
        await eventually(lambda: len(fake.starts()) == 2 and daemon.mesh.state == "running")
        # The snapshot, node-level changes, and table entries added and flushed: read until
        # each has come (the crash's flush and re-add come last), checking every line.
        wanted = {
            ("snapshot", None),
            ("interfaces", None),
            ("addresses", None),
            ("mesh", None),
            ("babeld", None),
            ("interface", "add"),
            ("route", "flush"),
            ("neighbour", "add"),
            ("xroute", "flush"),
        }
        seen: set[tuple[str, str | None]] = set()
        with trio.fail_after(WAIT):
            while not wanted <= seen:
                line = await watch.readline()
                assert line is not None, f"watch ended; missing {sorted(wanted - seen, key=str)}"
                event: dict[str, Any] = json.loads(line)
                check_watch(event)
                seen.add((event["type"], event.get("action")))
