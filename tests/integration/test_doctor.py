"""`babblerctl doctor` on real nodes: all well on a running mesh; the far end gone, this
node's babblerd gone, and what a crashed babblerd left, each said and ranked as it should."""

from __future__ import annotations

import json
import os
import signal
from typing import Any

import pytest

from babbler.lab import Lab, Node
from babbler.lab.jobs import babblerctl
from tests.integration.helpers import LabFactory, until

pytestmark = pytest.mark.integration


def doctor(lab: Lab, node: Node) -> tuple[int, dict[str, dict[str, Any]]]:
    done = babblerctl(node, "doctor", "--json", "--state-dir", str(node.state_dir))
    return done.returncode, {c["check"]: c for c in json.loads(done.stdout or "[]")}


def test_doctor_on_a_running_mesh_and_when_things_go_away(make_lab: LabFactory) -> None:
    lab = make_lab(2, "line")
    n1, n2 = lab.nodes
    lab.wait_reachable(60)
    until(lambda: doctor(lab, n1)[1]["link v1x2"]["status"] == "ok", what="n1's link ok")
    # The cable's MTU line comes once n1 has n2's node info, a moment after the link.
    until(lambda: "mtu" in doctor(lab, n1)[1], what="the doctor's mtu line")
    code, found = doctor(lab, n1)
    assert code == 0, found
    assert {c["status"] for c in found.values()} == {"ok"}, found
    assert found["link v1x2"]["saw"].startswith("1 neighbour"), found["link v1x2"]
    assert "rules" in found["fence"]["saw"] and found["forwarding"]["saw"] == "IPv6 forwarding on"
    screen = babblerctl(n1, "doctor", "--state-dir", str(n1.state_dir))
    assert screen.returncode == 0 and len(screen.stdout.splitlines()) == len(found)

    os.kill(n2.pid or 0, signal.SIGTERM)  # the far end stops: no neighbour, a warning
    lab.wait_exit(n2)
    until(lambda: doctor(lab, n1)[1]["link v1x2"]["status"] == "warn", what="no neighbour said")
    code, found = doctor(lab, n1)
    assert code == 0 and "mesh key" in found["link v1x2"]["do"], found["link v1x2"]

    os.kill(n1.pid or 0, signal.SIGKILL)  # this node's babblerd crashes: it fails, and says
    lab.wait_exit(n1)  # what the crash left in the kernel's settings
    code, found = doctor(lab, n1)
    assert code == 1 and found["babblerd"]["status"] == "fail", found
    record = n1.state_dir / "sysctls"  # counted in one line, listed in babblerd's record
    assert f"kernel settings changed (sudo cat {record} lists them)" in found["leftovers"]["saw"]
    assert "net/ipv6/conf/all/forwarding" in record.read_text()
    lab.start(n1)  # the next start puts them back
    os.kill(n1.pid or 0, signal.SIGTERM)
    lab.wait_exit(n1)
    code, found = doctor(lab, n1)
    assert code == 1 and "leftovers" not in found
    assert found["forwarding"]["saw"] == "IPv6 forwarding off"
