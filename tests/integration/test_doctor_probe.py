"""`babblerctl doctor --probe` and `--bundle` on one lab: every layer passes on a healthy
mesh; a rule that drops one cable's bench traffic is named with its cable and told as a
drop (a timeout), not a refusal; a VPN-like link with a route inside the mesh's IPv4 prefix
is named with its owner; the bundle holds what it says and never the mesh key."""

from __future__ import annotations

import json
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest

from babbler.core.meshkey import KEY_BYTES
from babbler.ctl.keygen import write_new_key
from babbler.lab import Lab, Node
from babbler.lab.jobs import babblerctl
from tests.integration.helpers import LabFactory, until

pytestmark = pytest.mark.integration


def probe(node: Node) -> tuple[int, dict[str, dict[str, Any]], float]:
    start = time.monotonic()
    done = babblerctl(node, "doctor", "--probe", "--json", "--state-dir", str(node.state_dir))
    took = time.monotonic() - start
    return done.returncode, {c["check"]: c for c in json.loads(done.stdout or "[]")}, took


def cable_address(lab: Lab, node: Node, interface: str) -> str:
    ends = {e["interface"]: e["address"] for e in lab.status(node)["addresses_v4"]}
    return str(ends[interface])


def test_the_probe_names_a_dropping_cable_and_a_vpn_route(
    make_lab: LabFactory, tmp_path: Path
) -> None:
    key = tmp_path / "mesh.key"
    write_new_key(key)
    lab = make_lab(3, "line", True, "--key-file", str(key))
    n1, n2, _ = lab.nodes
    lab.wait_reachable(60)

    def named() -> bool:  # names and IPv4 node addresses come in node info, after routes
        seen = {n["name"]: n for n in lab.status(n2)["nodes"]}
        return all(seen.get(name, {}).get("node_address_v4") for name in ("n1", "n3"))

    def healthy() -> bool:
        code, found, _ = probe(n2)
        return code == 0 and "overlaps" in found

    until(named, what="n2 holds n1's and n3's node info")
    until(healthy, what="n2's probe passes every layer")  # cable addresses come after babel
    code, found, took = probe(n2)
    assert {c["status"] for c in found.values()} == {"ok"}, found
    assert "Gbit/s" in found["cable v2x1"]["saw"] and "Gbit/s" in found["cable v2x3"]["saw"]
    assert found["route n3 IPv4"]["saw"].endswith("over cable v2x3 to n3"), found
    assert {"node n1 IPv6", "node n1 IPv4", "node n3 IPv6", "node n3 IPv4"} <= set(found)

    # n1 drops its answers to n2's cable address on the bench port: a firewall that drops.
    n2_end = cable_address(lab, n2, "v2x1")
    rule = ["pref", "100", "to", n2_end, "ipproto", "tcp", "sport", "6699", "blackhole"]
    assert lab.exec(n1, "ip", "rule", "add", *rule).returncode == 0
    code, found, took = probe(n2)
    cable = found["cable v2x1"]
    assert code == 1 and cable["status"] == "fail", found
    assert "n1" in cable["saw"] and "dropped" in cable["saw"] and "refused" in cable["saw"]
    assert "port 6699" in cable["do"] and "n1" in cable["do"], cable
    assert found["cable v2x3"]["status"] == "ok", found
    assert "node n1 IPv4" not in found and "stopped at cables" in found["probe"]["saw"]
    assert took < 30, took
    assert lab.exec(n1, "ip", "rule", "del", *rule).returncode == 0

    # A VPN's tunnel on n1 with a route inside the mesh's IPv4 prefix (a veth: the lab's
    # kernel has no dummy links).
    for command in (
        ["ip", "link", "add", "tailscale0", "type", "veth", "peer", "name", "tsp0"],
        ["ip", "link", "set", "tailscale0", "up"],
        ["ip", "route", "add", "10.77.226.0/24", "dev", "tailscale0"],
    ):
        assert lab.exec(n1, *command).returncode == 0, command

    # babeld restarts without IPv4: the cable is listed again once babeld hears its neighbour,
    # and its far end named once its route is back
    def withdrawn() -> bool:
        saw = str(probe(n1)[1].get("cable v1x2", {}).get("saw", ""))
        return "no cable address" in saw and "to n2" in saw

    until(withdrawn, what="IPv4 withdrawn, the far end named")
    code, found, _ = probe(n1)
    assert code == 1, found
    overlap = found["overlaps"]
    assert overlap["status"] == "fail" and "tailscale0 (Tailscale)" in overlap["saw"], overlap
    assert "10.77.226.0/24" in overlap["saw"] and "--ipv4-prefix" in overlap["do"], overlap
    assert "to n2" in found["cable v1x2"]["saw"], found["cable v1x2"]

    # The bundle: what it says it holds, the probe in it, never the key.
    out = tmp_path / "bundle.tar.gz"
    log = ["--log-file", str(n1.log)]
    done = babblerctl(n1, "doctor", "--bundle", str(out), *log, "--state-dir", str(n1.state_dir))
    assert done.returncode == 0 and f"log from {n1.log}" in done.stdout, done
    with tarfile.open(out) as tar:
        files = {Path(m.name).name: tar.extractfile(m).read() for m in tar.getmembers()}  # type: ignore[union-attr]
    assert set(files) == {
        "README.txt", "doctor.json", "status.json", "nodes.json", "versions.json",
        "kernel-settings.json", "log.txt",
    }  # fmt: skip
    checks = {c["check"]: c for c in json.loads(files["doctor.json"])}
    assert "tailscale0" in checks["overlaps"]["saw"]
    assert "net.ipv6.conf.all.forwarding" in json.loads(files["kernel-settings.json"])
    assert len(files["log.txt"].splitlines()) > 5
    secret = key.read_bytes().strip()
    assert len(secret) == 2 * KEY_BYTES
    for name, data in files.items():
        assert secret not in data and secret.lower() not in data.lower(), name
