"""Start babeld as soon as the first usable link is known, before the daemon's heavy imports.

From exec to babeld spawned, babblerd used to spend ~0.35 s after Python's own start on
imports (trio 0.10 s, structlog 0.06 s, pyroute2 0.11 s) and its first netlink snapshot, all
of which babeld does not need: it needs its command line, the -c file and one interface.
This module, standard library and babbler's lean modules only, reads the links from sysfs,
takes a router id and spawns babeld from the main thread (the one that later runs trio, so
PR_SET_PDEATHSIG ties babeld to babblerd as for every later start). The daemon adopts the
process as its first session once it has its own netlink view, or stops it when that view
disagrees: any launch but the one it would start itself (babeld/launch.py `launch_for`).

Only on Linux, in `always` mode, and only after a clean stop: leftovers of a babeld that died
with its babblerd (a pid file, stale `proto babel` routes) are the normal start's to clear.
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass

from babbler.core.config import Config
from babbler.core.errors import EnvironmentProblem
from babbler.core.links import Selector, usable_names
from babbler.core.meshkey import MeshKey
from babbler.daemon import routerids
from babbler.daemon.babeld.launch import BabeldFiles, Launch, found, launch_for, write_private
from babbler.daemon.ipv4 import Ipv4
from babbler.daemon.nodeid import NodeId
from babbler.daemon.spawn import STOP_GRACE, popen_gone, spawn, stop
from babbler.host.sysfs import read_links


@dataclass
class Early:
    """A babeld started before the daemon, waiting to be adopted."""

    launch: Launch
    popen: subprocess.Popen[bytes]
    spawned_at: float  # time.monotonic()
    adopted: bool = False  # the daemon's session owns the process now

    def stop(self) -> None:
        """Not adopted: end it (the daemon starts its own). Idempotent."""
        if self.adopted:
            return
        self.adopted = True  # nobody's: stopped here, once
        if self.popen.poll() is None:
            stop(self.popen.send_signal, popen_gone(self.popen), STOP_GRACE)
            self.popen.wait()
        if self.popen.stdout is not None:
            self.popen.stdout.close()


def why_not(config: Config) -> str | None:
    """Why babeld is not started early here, or None."""
    if not config.platform.early_start:
        return f"not on {config.platform.name}"
    if config.mode != "always":
        return f"mode {config.mode}"
    files = BabeldFiles.under(config.private_dir, config.state_dir)
    if files.pid.exists() or files.socket.exists():
        return "a previous babeld left files (the normal start clears them)"
    if not found(config.babeld):
        return f"{config.babeld} not found"
    return None


def start(config: Config, node: NodeId, key: MeshKey | None) -> tuple[Early | None, str]:
    """Spawn babeld on the first usable link, or say why not. Never raises for what the
    normal start would handle (an OSError here means: the normal start will see to it)."""
    reason = why_not(config)
    if reason:
        return None, reason
    try:
        links = read_links()
        usable = sorted(usable_names(links, Selector(config.interface, config.exclude)))
        if not usable:
            return None, "no usable link yet"
        first = usable[0]
        ipv4 = Ipv4.load(config.ipv4_prefix, config.state_dir, node.value)
        router_id = routerids.take(config.state_dir)
        launch = launch_for(config, key, ipv4, node.value, router_id, first, links[first])
        write_private(launch.files.config, launch.config_text())
        popen = spawn(launch.args(), tied=launch.tied)
    except (OSError, EnvironmentProblem) as error:
        return None, f"cannot: {error}"
    return Early(launch, popen, time.monotonic()), f"on {first}"
