"""RDMA over Thunderbolt readiness: the macOS outputs read (core/rdma.py, from the written
outputs of tests/unit/data/darwin/), the rule, another node's `rdma` checked as hostile
input, the cable graph's `rdma_ready`, and the doctor's lines naming the Mac that is not
ready and what to run there."""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from babbler.core import rdma
from babbler.core.cablegraph import CableGraph
from babbler.ctl import doctor as gathering
from babbler.daemon.nodes import checked
from babbler.lab.macos import output
from babbler.lab.macos.commands import USAGE, Rdma, answer
from babbler.lab.macos.server import Description
from babbler.ui.doctor import OK, WARN, Check, Facts, checks, failed
from tests.unit.samples import typed
from tests.unit.test_macos_lab import TB_DEVICES, MemoryHost

DATA = Path(__file__).parent / "data" / "darwin"


def text(name: str) -> str:
    return (DATA / name).read_text()


PORTS = text("networksetup-listallhardwareports.txt")
PROFILE = text("system_profiler-thunderbolt.json")  # en4 cabled at 80 Gb/s to a Mac Studio
TB4_PROFILE = PROFILE.replace('"80 Gb/s"', '"40 Gb/s"')  # the same link at Thunderbolt 4's


def mac(**outputs: str | None) -> dict[str, Any]:
    """A Mac mini ready for jaccl, with some outputs changed."""
    given_ = {
        "version_text": text("sw_vers-productVersion.txt"),
        "rdma_ctl_text": text("rdma_ctl-status.txt"),
        "devices_text": text("ibv_devices.txt"),
        "profile_json": PROFILE,
        "ports_text": PORTS,
        **outputs,
    }
    return rdma.read(**given_)


# -- the outputs ---------------------------------------------------------------------------


def test_a_ready_mac_read_from_its_outputs() -> None:
    value = mac()
    assert value == {
        "ready": True,
        "macos": "26.2",
        "rdma_ctl": "enabled",
        "devices": ["rdma_en2", "rdma_en3", "rdma_en4"],
        "cables": [
            {"interface": "en4", "speed_gbps": 80.0, "thunderbolt": 5, "device": "rdma_en4"}
        ],
    }
    assert rdma.problems(value) == []


def test_each_thing_that_keeps_jaccl_off_is_named_with_what_to_do() -> None:
    old = rdma.problems(mac(version_text="26.1\n", rdma_ctl_text=None, devices_text=None))
    assert len(old) == 1 and "macOS 26.1" in old[0].what and "Software Update" in old[0].do
    unknown = rdma.problems(mac(rdma_ctl_text=None))
    assert [p.what for p in unknown] == ["rdma_ctl status: not known (no rdma_ctl answer)"]
    assert "Recovery" in unknown[0].do
    off = rdma.problems(mac(rdma_ctl_text="disabled\n"))
    assert [p.what for p in off] == ["rdma_ctl status: disabled"]
    assert "rdma_ctl enable" in off[0].do
    bare = rdma.problems(mac(devices_text=text("ibv_devices-none.txt")))  # mlx #3777
    assert [p.what for p in bare] == ["no RDMA device for en4 (ibv_devices lists none)"]
    slow = rdma.problems(mac(profile_json=TB4_PROFILE))  # exo #1813: a device all the same
    assert len(slow) == 1 and "en4 at 40 Gb/s" in slow[0].what and "Thunderbolt 5" in slow[0].do
    alone = rdma.problems(mac(profile_json=PROFILE.replace('"_items"', '"_gone"')))
    assert [p.what for p in alone] == ["no Thunderbolt cable to another Mac"]
    assert mac(rdma_ctl_text="disabled\n")["ready"] is False


def test_a_link_speed_not_given_is_said_so_not_taken_for_thunderbolt_4() -> None:
    value = mac(profile_json=PROFILE.replace('"80 Gb/s"', '"fast"'))  # system_profiler reworded
    assert value["cables"][0]["speed_gbps"] is None and value["ready"] is False
    (unread,) = rdma.problems(value)
    assert unread.what.startswith("no link speed given for en4 (system_profiler")
    assert "Thunderbolt 4 or less" not in unread.what and "80 Gb/s" in unread.do


@given(st.lists(st.from_regex(r"rdma_en[0-9]{1,2}", fullmatch=True), max_size=8, unique=True))
def test_ibv_devices_tables_read_back_to_their_devices(names: list[str]) -> None:
    table = output.ibv_devices((name, "e0c5797d9c8fac05") for name in names)
    assert rdma.rdma_devices(table) == sorted(names)


@given(st.lists(st.integers(0, 999), min_size=1, max_size=3))
def test_versions_read_and_compare_as_numbers(parts: list[int]) -> None:
    version = ".".join(map(str, parts))
    assert rdma.macos_version(version + "\n") == version
    ready = rdma.version_tuple(version) >= rdma.MINIMUM_MACOS
    said = [p for p in rdma.problems(mac(version_text=version)) if "macOS" in p.what]
    assert bool(said) is not ready


@pytest.mark.parametrize("nonsense", ["", "{", "[]", '{"SPThunderboltDataType": 3}', "null"])
def test_nonsense_from_the_commands_is_no_crash(nonsense: str) -> None:
    assert rdma.thunderbolt_ports(nonsense, PORTS) == []
    assert rdma.macos_version(nonsense) is None and rdma.rdma_ctl_state(nonsense) is None
    assert rdma.rdma_devices(nonsense) == []


def test_the_lab_prints_what_the_parsers_read() -> None:
    assert output.ibv_devices([]) == text("ibv_devices-none.txt")
    rows = [("rdma_en2", "e0c5797d9c8fac05"), ("rdma_en3", "e1c5797d9c8fac05")]
    rows.append(("rdma_en4", "e2c5797d9c8fac05"))
    assert output.ibv_devices(rows) == text("ibv_devices.txt")
    assert output.rdma_ctl_status(True) == text("rdma_ctl-status.txt")


# -- another node's `rdma`: hostile until checked ----------------------------------------------


def info(value: object) -> dict[str, Any]:
    return {"node_id": "0a0000000002", "rdma": value}


def test_a_good_rdma_passes_the_check_unchanged() -> None:
    value = mac()
    assert checked.check(info(value))["rdma"] == value
    assert checked.check(info(None))["rdma"] is None
    assert checked.check({"node_id": "0a0000000002"})["rdma"] is None  # an older version


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda v: v.update(ready="yes"), "rdma.ready: expected a boolean"),
        (lambda v: v.update(macos="26.2\x1b[2J"), "rdma.macos"),
        (lambda v: v.update(macos="twenty-six"), "rdma.macos: not a macOS version"),
        (lambda v: v.update(rdma_ctl="x" * 65), "rdma.rdma_ctl"),
        (lambda v: v.update(devices=["rdma_en2"] * 65), "rdma.devices: more than 64"),
        (lambda v: v.update(devices=["mlx5_0"]), "rdma.devices[0]: expected an RDMA device"),
        (lambda v: v.update(devices="rdma_en2"), "rdma.devices: expected a list"),
        (lambda v: v["cables"][0].update(interface="en/4"), "rdma.cables[0].interface"),
        (lambda v: v["cables"][0].update(speed_gbps=1e9), "rdma.cables[0].speed_gbps"),
        (lambda v: v["cables"][0].update(device="rdma_\u202een4"), "rdma.cables[0].device"),
        (lambda v: v.update(cables=[{}] * 65), "rdma.cables: more than 64"),
    ],
)
def test_a_bad_rdma_is_refused_naming_the_field(change: Any, said: str) -> None:
    value = copy.deepcopy(mac())
    change(value)
    with pytest.raises(checked.BadInfo, match=said.replace("[", r"\[").replace("]", r"\]")):
        checked.parse(json.dumps(info(value)).encode())


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner),
        max_leaves=20,
    )
)
def test_anything_as_rdma_is_checked_or_refused_never_a_crash(value: object) -> None:
    try:
        got = checked.check(info(value))["rdma"]
    except checked.BadInfo:
        return
    assert got is None or isinstance(got["ready"], bool)


# -- the mesh's Macs: the cable graph and the doctor ---------------------------------------


def status(n2: dict[str, Any] | None, n3: dict[str, Any] | None = None) -> dict[str, Any]:
    """n1 (this Mac, ready) cabled to n2 on en4 (its en2), and to n3 on en2 (its en2)."""
    me = mac()
    me["cables"].append({**me["cables"][0], "interface": "en2", "device": "rdma_en2"})

    def node(n: int, value: dict[str, Any] | None, cables: list[dict[str, str]]) -> object:
        ident, name = f"0a000000000{n}", f"n{n}"
        return {"node_id": ident, "name": name, "reachable": True, "version": "1", "rdma": value,
                "cables": cables}  # fmt: skip

    return {
        "node_id": "0a0000000001",
        "name": "n1",
        "node_address": "fde0::",
        "rdma": me,
        "addresses_v4": [
            {"interface": "en4", "address": "10.77.200.0", "peer": "10.77.200.1"},
            {"interface": "en2", "address": "10.77.200.2", "peer": "10.77.200.3"},
        ],
        "nodes": [
            node(2, n2, [{"interface": "en2", "address": "10.77.200.1", "peer": "10.77.200.0"}]),
            node(3, n3, [{"interface": "en2", "address": "10.77.200.3", "peer": "10.77.200.2"}]),
        ],
    }


def doctor(value: dict[str, Any]) -> dict[str, Check]:
    return {c.check: c for c in checks(Facts("macOS", True, "sock", typed(value)))}


def peer(**changes: Any) -> dict[str, Any]:
    value = mac(**changes)
    device = "rdma_en2" if "rdma_en2" in value["devices"] else None  # its cable is on en2
    value["cables"] = [{**value["cables"][0], "interface": "en2", "device": device}]
    value["ready"] = not rdma.problems(value)
    return value


def test_the_cable_graph_takes_each_node_s_readiness() -> None:
    graph = CableGraph.from_status(status(peer(rdma_ctl_text="disabled\n"), None))
    ready = {h.name: h.rdma_ready for h in graph.hosts.values()}
    assert ready == {"n1": True, "n2": False, "n3": None}


def test_a_peer_saying_ready_with_problems_is_judged_as_the_doctor_judges_it() -> None:
    liar = peer(rdma_ctl_text="disabled\n") | {"ready": True}  # older or hostile
    heard = checked.check(info(liar))["rdma"]
    assert heard["ready"] is False
    graph = CableGraph.from_status(status(heard, peer()))
    assert {h.name: h.rdma_ready for h in graph.hosts.values()} == {
        "n1": True, "n2": False, "n3": True,
    }  # fmt: skip
    assert doctor(status(heard, peer()))["rdma n2"].status == WARN
    assert checked.check(info(peer()))["rdma"]["ready"] is True


def test_the_doctor_names_the_mac_that_is_not_ready_and_what_to_run_there() -> None:
    found = doctor(status(peer(rdma_ctl_text="disabled\n"), peer()))
    assert found["rdma n1"].status == OK and "en4 to n2 80 Gb/s rdma_en4" in found["rdma n1"].saw
    n2 = found["rdma n2"]
    assert n2.status == WARN and n2.saw.startswith(
        "n2 not ready for jaccl: rdma_ctl status: disabled"
    )
    assert n2.do.startswith("on n2: in macOS Recovery") and "rdma_ctl enable" in n2.do
    assert found["rdma n3"].status == OK
    jaccl = found["jaccl"]
    assert jaccl.status == WARN and "n2 not ready" in jaccl.saw
    assert "no cable between n2 and n3" in jaccl.saw  # no full mesh either
    assert not failed(found.values())  # a Mac without RDMA is no broken mesh


def test_the_doctor_says_which_cable_lacks_a_device_and_thunderbolt_4() -> None:
    bare = doctor(status(peer(devices_text=text("ibv_devices-none.txt"))))["rdma n2"]
    assert "no RDMA device for en2" in bare.saw and "restart" in bare.do
    slow = doctor(status(peer(profile_json=TB4_PROFILE)))["rdma n2"]
    assert "40 Gb/s" in slow.saw and "Thunderbolt 5" in slow.do


def test_a_full_mesh_of_ready_macs_would_take_a_jaccl_hostfile() -> None:
    both = status(peer(), None)
    both["nodes"].pop()
    found = doctor(both)
    assert found["jaccl"].status == OK and found["jaccl"].saw.endswith("over n1, n2 would be valid")


def test_a_mesh_without_macs_has_no_rdma_line() -> None:
    linux = status(None, None)
    linux["rdma"] = None
    assert not [name for name in doctor(linux) if name.startswith(("rdma", "jaccl"))]


# -- the macOS lab's commands ----------------------------------------------------------------


def test_the_lab_mac_answers_as_a_mac_and_refuses_what_needs_recovery() -> None:
    host = MemoryHost()
    assert answer(host, "sw_vers", ["-productVersion"]).out == "26.2\n"
    assert rdma.rdma_ctl_state(answer(host, "rdma_ctl", ["status"]).out) == "enabled"
    devices = answer(host, "ibv_devices", []).out
    assert rdma.rdma_devices(devices) == ["rdma_en2", "rdma_en3"]
    enable = answer(host, "rdma_ctl", ["enable"])  # macOS Recovery only (TN3205)
    assert enable.code == USAGE and "does not answer `rdma_ctl enable`" in enable.err
    host.mac = Rdma("26.2", "no-devices", TB_DEVICES)
    assert answer(host, "rdma_ctl", ["status"]).out == "enabled\n"
    assert rdma.rdma_devices(answer(host, "ibv_devices", []).out) == []
    host.mac = Rdma("26.2", "disabled", TB_DEVICES)
    assert answer(host, "rdma_ctl", ["status"]).out == "disabled\n"
    host.mac = Rdma("26.1", "enabled", TB_DEVICES)
    older = answer(host, "rdma_ctl", ["status"])
    assert older.code == 127 and "command not found" in older.err
    assert answer(host, "sw_vers", []).code == USAGE


def test_without_babblerd_the_doctor_reads_this_mac_itself() -> None:
    outputs = {
        ("sw_vers", "-productVersion"): "26.1\n",
        ("rdma_ctl", "status"): "disabled\n",
        ("networksetup", "-listallhardwareports"): PORTS,
        ("system_profiler", "SPThunderboltDataType", "-json"): PROFILE,
    }

    def run(args: Sequence[str]) -> str:
        if tuple(args) not in outputs:
            raise OSError(f"{args[0]}: not found")  # ibv_devices: none before 26.2
        return outputs[tuple(args)]

    links, facts = gathering.mac_facts(run)
    found = {c.check: c for c in checks(Facts("macOS", True, "sock", None, links=links, mac=facts))}
    here = found["rdma this Mac"]
    assert here.status == WARN and "macOS 26.1: RDMA over Thunderbolt needs 26.2" in here.saw
    assert here.do.startswith("on this Mac: update macOS")


def test_a_lab_mac_described_before_rdma_is_a_ready_26_2(tmp_path: Path) -> None:
    described = {"machine": "Mac n1", "ports": [["Thunderbolt 1", "en2"]], "buses": []}
    (tmp_path / "macos.json").write_text(json.dumps(described))
    told = Description.read(tmp_path / "macos.json")
    assert (told.macos, told.rdma) == ("26.2", "enabled")
    (tmp_path / "macos.json").write_text(json.dumps({**described, "rdma": "disabled"}))
    assert Description.read(tmp_path / "macos.json").rdma == "disabled"


# The keys a profile has, and any text: the trees reach the parser's every branch
keys = st.sampled_from(
    ["receptacle_1_tag", "_items", "domain_uuid_key", "receptacle_id_key", "current_speed_key"]
) | st.text(max_size=8)
values = st.sampled_from(["3", "80 Gb/s", "Up to 40 Gb/s", "9 Gb/s"])
json_trees = st.recursive(
    st.none() | st.booleans() | st.integers() | values | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=12,
)
bus_keys = keys


@given(st.lists(st.dictionaries(bus_keys, json_trees), max_size=3), json_trees)
def test_any_profile_a_mac_prints_is_read_without_a_crash(buses: list[Any], other: Any) -> None:
    """babblerd reads the profile in its main nursery: a shape no Mac printed must not end it."""
    for profile in ({"SPThunderboltDataType": buses}, other):
        value = mac(profile_json=json.dumps(profile))
        assert isinstance(value["ready"], bool)
