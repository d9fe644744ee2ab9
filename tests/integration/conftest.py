from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from babbler.lab import Lab
from tests import needs
from tests.integration.helpers import WAIT, LabFactory


@pytest.fixture
def make_lab() -> Iterator[LabFactory]:
    """Labs named after this test process; every one is taken down, also on failure."""
    labs: list[Lab] = []

    def make(nodes: int, topology: str = "line", start: bool = True, *args: str) -> Lab:
        name = f"t{os.getpid() % 100000}{len(labs)}"
        lab = Lab.create(name, nodes, topology, ["--mode", "always", *args])
        labs.append(lab)
        if start:
            lab.start_all()
        return lab

    yield make
    for lab in labs:
        taken_down(lab)


def taken_down(lab: Lab) -> None:
    """The lab's logs printed (pytest shows them when the test failed), the lab taken down,
    and none of its namespaces left."""
    _print_logs(lab)
    lab.down()
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert f"bbl-{lab.name}-" not in left, left


def _print_logs(lab: Lab, lines: int = 60) -> None:
    """The end of each node's daemon log, before `down` deletes it."""
    for node in lab.nodes:
        try:
            text = node.log.read_text(errors="replace").splitlines()
        except OSError:
            continue
        print(f"--- {lab.name} {node.name}: last {lines} lines of {node.log}")
        print("\n".join(text[-lines:]))


@contextmanager
def macos_lab(
    tag: str, nodes: int, topology: str, *, start: bool = True, within: float = WAIT, **options: Any
) -> Iterator[Lab]:
    """A lab of macOS nodes (`options`: Lab.create's, platform="mixed" for Linux ones in
    between), started and reachable within `within` seconds unless `start` is False; taken
    down at the end (taken_down)."""
    needs.netifaces()
    options.setdefault("platform", "macos")
    name = f"{tag}{os.getpid() % 100000}"
    lab = Lab.create(name, nodes, topology, ["--mode", "always"], **options)
    try:
        if start:
            lab.start_all()
            lab.wait_reachable(within)
        yield lab
    finally:
        taken_down(lab)
