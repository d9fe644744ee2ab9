"""RDMA over Thunderbolt readiness on the macOS lab (one lab: three Macs cabled to each
other over Thunderbolt 5): each node reads its own (`status.rdma`), carries it in its node
info, and one `babblerctl doctor` on any node names the Mac that is not ready and what to
run there, and whether a jaccl hostfile would run. `babbler-lab mac` makes a node not
ready, as a Mac with RDMA off or without its devices."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from babbler.lab import Lab, Node
from tests.integration.conftest import macos_lab
from tests.integration.helpers import WAIT, until

LAB_CLI = Path(sys.executable).parent / "babbler-lab"


@pytest.fixture(scope="module")
def macs() -> Iterator[Lab]:
    with macos_lab("rd", 3, "ring", speed_gbps=80) as lab:
        yield lab


def doctor(lab: Lab, node: Node) -> dict[str, dict[str, Any]]:
    done = lab.exec(node, "babblerctl", "doctor", "--json", "--socket", str(node.socket))
    return {c["check"]: c for c in json.loads(done.stdout)}


def auto_backend(lab: Lab, node: Node) -> tuple[str, str]:
    """`babblerctl hostfile --format mlx --backend auto` there: the backend and why."""
    done = lab.exec(
        node, "babblerctl", "hostfile", "--format", "mlx", "--backend", "auto",
        "--socket", str(node.socket),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["backend"], done.stderr


def lab_cli(lab: Lab, *args: str) -> str:
    done = subprocess.run(
        [str(LAB_CLI), "--name", lab.name, *args], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def infos_say(lab: Lab, node: Node, ready: dict[str, bool]) -> bool:
    """`node`'s status shows each named node's readiness as `ready` says (its own too)."""
    status = lab.status(node)
    seen = {n["name"]: (n.get("rdma") or {}).get("ready") for n in status["nodes"]}
    seen[status["name"]] = (status.get("rdma") or {}).get("ready")
    return all(seen.get(name) is value for name, value in ready.items())


def test_three_ready_macs_and_a_doctor_that_names_the_one_that_is_not(macs: Lab) -> None:
    n1, n2, n3 = macs.nodes
    until(lambda: infos_say(macs, n1, {"n1": True, "n2": True, "n3": True}), WAIT, "all ready")
    mine = macs.status(n1)["rdma"]
    assert mine["macos"] == "26.2" and mine["rdma_ctl"] == "enabled"
    assert sorted(c["interface"] for c in mine["cables"]) == ["en2", "en3"]
    assert {c["thunderbolt"] for c in mine["cables"]} == {5}
    found = doctor(macs, n1)
    assert {found[f"rdma {n}"]["status"] for n in ("n1", "n2", "n3")} == {"ok"}
    assert found["jaccl"]["status"] == "ok"
    assert found["jaccl"]["saw"].endswith("over n1, n2, n3 would be valid")
    assert auto_backend(macs, n1)[0] == "jaccl"  # what h2's auto reads: Host.rdma_ready

    # n2 with RDMA off, as a Mac whose owner never ran `rdma_ctl enable` in Recovery
    said = lab_cli(macs, "mac", "n2", "--rdma", "disabled")
    assert "n2 macOS 26.2, RDMA disabled" in said
    macs.stop(n2)
    macs.start(n2)
    # each node hears it on its own time (node info is asked by each)
    until(lambda: infos_say(macs, n1, {"n2": False}), WAIT, "n1 hears n2 is not ready")
    until(lambda: infos_say(macs, n3, {"n2": False}), WAIT, "n3 hears n2 is not ready")
    found = doctor(macs, n3)  # any node's doctor names it
    bad = found["rdma n2"]
    assert bad["status"] == "warn" and "rdma_ctl status: disabled" in bad["saw"]
    assert bad["do"].startswith("on n2: in macOS Recovery") and "rdma_ctl enable" in bad["do"]
    assert found["rdma n3"]["status"] == "ok"
    assert found["jaccl"]["status"] == "warn" and "n2 not ready" in found["jaccl"]["saw"]
    assert doctor(macs, n2)["rdma n2"]["do"].startswith("on this Mac:")
    backend, why = auto_backend(macs, n1)
    assert backend == "ring" and "not ready for RDMA: n2" in why

    # n3 enabled, yet without devices (mlx #3777): read again when its cable comes back
    lab_cli(macs, "mac", "n3", "--rdma", "no-devices")
    ends = macs.cable(n1.index, n3.index)

    def cables_of_n3() -> int:
        return len(macs.status(n3)["rdma"]["cables"])

    macs.plug(*ends, up=False)
    until(lambda: cables_of_n3() == 1, WAIT, "n3 reads again with a cable out")
    macs.plug(*ends, up=True)
    until(lambda: cables_of_n3() == 2, WAIT, "n3 reads again with it back")
    until(lambda: infos_say(macs, n1, {"n3": False}), WAIT, "n1 hears n3 has no devices")

    def named() -> bool:
        bare = doctor(macs, n1)["rdma n3"]
        return "no RDMA device for en2, en3" in bare["saw"] and "restart" in bare["do"]

    until(named, WAIT, "n1's doctor names both of n3's cables without a device")
