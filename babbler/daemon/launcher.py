"""babeld's launches as the mesh supervisor asks for them (mesh.py `MeshHost`): each start's
launch (babeld/launch.py `launch_for`, the one the early start uses too) under a fresh
router id, the options of each interface line, and the early-started babeld adopted once
or stopped.

It reads the settings, the key, IPv4, the links as last read and this node's identity
through `Reads`, a port; it changes only the identity's router ids.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import structlog

from babbler.core.config import Config
from babbler.core.links import Link
from babbler.core.meshkey import MeshKey
from babbler.daemon.babeld.launch import Launch, launch_for, link_options
from babbler.daemon.early import Early
from babbler.daemon.identity import Identity
from babbler.daemon.ipv4_service import Ipv4Service

log = structlog.get_logger("babbler.daemon")


@dataclass(frozen=True)
class Reads:
    """What a launch is made of, read when babeld starts (a port)."""

    config: Callable[[], Config]
    key: MeshKey | None
    ipv4: Ipv4Service
    identity: Identity
    links: Callable[[], Mapping[str, Link]]  # as the last reconcile read them
    usable: Callable[[], set[str]]  # the names of the usable ones
    starting: Callable[[], None]  # told before each launch (babeld looked up again)


class Launcher:
    def __init__(self, reads: Reads, early: Early | None) -> None:
        self._reads = reads
        self._early = early  # babeld started before the daemon: adopted or stopped, once

    def interface_options(self, name: str) -> str:
        """The options of babeld's `interface NAME ...` line for this link now."""
        reads = self._reads
        keyed, ipv4_on = reads.key is not None, reads.ipv4.state.prefix is not None
        return link_options(reads.config(), keyed, ipv4_on, reads.links().get(name))

    def launch(self, first: str) -> Launch:
        """A new babeld's launch on `first`, under a fresh router id."""
        reads = self._reads
        reads.starting()
        reads.identity.new_babeld(reads.config().hello_interval)
        return self._launch_on(first, reads.identity.take_router_id())

    def adopt(self) -> tuple[Launch, subprocess.Popen[bytes]] | None:
        """The babeld started early, once: adopted when its link is usable in the netlink
        view too and its launch is the one this daemon would start, else stopped (the
        daemon then starts its own)."""
        early, self._early = self._early, None
        if early is None:
            return None
        first = early.launch.first_interface
        # The launch this daemon would start under the early one's router id: anything else
        # (IPv4 decided otherwise since, the link's cost, ...) is a babeld of its own.
        drifted = self._launch_on(first, early.launch.router_id) != early.launch
        if first not in self._reads.usable() or early.popen.poll() is not None or drifted:
            log.info("babeld started early not adopted", interface=first, drifted=drifted)
            early.stop()
            return None
        self._reads.identity.new_babeld(self._reads.config().hello_interval)
        early.adopted = True
        return early.launch, early.popen

    def _launch_on(self, first: str, router_id: str) -> Launch:
        reads = self._reads
        state, node_id, link = reads.ipv4.state, reads.identity.node_id, reads.links().get(first)
        return launch_for(reads.config(), reads.key, state, node_id, router_id, first, link)
