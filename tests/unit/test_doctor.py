"""`babblerctl doctor`: a healthy host passes, and every check has a fixture that makes it
fail (or warn, where the fact is only a hint). macOS facts come from outputs written in the
documented shapes (tests/unit/data/darwin/README.md)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from babbler.client.model import Status
from babbler.core import darwin_output as darwin
from babbler.ctl import doctor as gathering
from babbler.ui.doctor import (
    FAIL,
    FITTING,
    OK,
    WARN,
    Check,
    Facts,
    LinkFacts,
    LinuxFacts,
    checks,
    failed,
    render_checks,
)
from tests.unit.samples import typed

DATA = Path(__file__).parent / "data" / "darwin"

HEALTHY = typed(
    {
        "mesh": "running",
        "babeld": {"pid": 7, "version": "1.12.1", "restarts": 0, "last_error": None,
                   "my_id": "02:00:00:00:00:00:00:01", "found": True},
        "interfaces": [{"name": "tb1"}, {"name": "eth1"}],
        "neighbours": [{"interface": "tb1"}, {"interface": "eth1"}],
        "ipv4_prefix": "10.77.0.0/16",
        "node_address_v4": "10.77.1.1",
        "ipv4_problem": None,
    }
)  # fmt: skip
LINKS = (
    LinkFacts("eth0", up=True, carrier=True, link_local=True),  # the LAN: not a mesh link
    LinkFacts("eth1", up=True, carrier=True, link_local=True, mtu=1500, speed_mbps=10000),
    LinkFacts("tb1", up=True, carrier=True, link_local=True, mtu=65520, thunderbolt=True),
)
LINUX = LinuxFacts(
    sysctls={"net.ipv6.conf.all.forwarding": "1", "net.ipv4.ip_forward": "0"},
    accept_ra={"eth0": "2", "default": "2"},
    rules=12,
    thunderbolt_controller=True,
    thunderbolt_net=True,
)
LINUX_HOST = Facts("Linux", True, "/run/babbler/babblerd.sock", HEALTHY, links=LINKS, linux=LINUX)


def by_name(facts: Facts) -> dict[str, Check]:
    return {c.check: c for c in checks(facts)}


def test_a_healthy_linux_host_passes() -> None:
    found = checks(LINUX_HOST)
    assert [c for c in found if c.status != OK] == []
    assert not failed(found)
    names = [c.check for c in found]
    assert names == [
        "babblerd", "babeld", "kernel", "link eth0", "link eth1", "link tb1", "ipv4", "forwarding",
        "router advertisements", "fence", "thunderbolt-net",
    ]  # fmt: skip
    assert "not a mesh link" in by_name(LINUX_HOST)["link eth0"].saw


def change(facts: Facts, **what: object) -> Facts:
    return dataclasses.replace(facts, **what)  # type: ignore[arg-type]


def status(**what: object) -> Status:
    return dataclasses.replace(HEALTHY, **what)  # type: ignore[arg-type]


def linux(**what: object) -> LinuxFacts:
    return dataclasses.replace(LINUX, **what)  # type: ignore[arg-type]


def link(name: str, **what: object) -> tuple[LinkFacts, ...]:
    return tuple(
        dataclasses.replace(x, **what) if x.name == name else x  # type: ignore[arg-type]
        for x in LINKS
    )


def host(**what: object) -> Facts:
    return change(LINUX_HOST, **what)


def on(**what: object) -> Facts:
    return host(status=status(**what))


def kernel(**what: object) -> Facts:
    return host(linux=linux(**what))


BABELD = HEALTHY.babeld
GONE = "babblerd is not running (no socket at /x); start it: sudo babblerd"
CLASH = "route 10.77.0.0/24 table 254 overlaps 10.77.0.0/16"
FORWARDING_OFF = {"net.ipv6.conf.all.forwarding": "0"}
IP_FORWARD = {**LINUX.sysctls, "net.ipv4.ip_forward": "1"}
FIXTURES = {  # check -> (a host where it fails or warns, the status it gets, words it says)
    "babblerd": (host(status=None, status_error=GONE), FAIL, "not running"),
    "babeld": (on(babeld=replace(BABELD, found=False)), FAIL, "finds no babeld"),
    "babeld ": (on(babeld=replace(BABELD, pid=None, last_error="SIGKILL")), FAIL, "SIGKILL"),
    "babeld  ": (host(status=None, babeld_version=None), FAIL, "no babeld on PATH"),
    "kernel": (on(kernel_problem="cannot read links: no answer in 6 s"), FAIL, "no answer"),
    "link tb1": (host(links=link("tb1", link_local=False)), FAIL, "no IPv6 link-local"),
    "link tb1 ": (host(links=link("tb1", up=False)), WARN, "down"),
    "link eth1": (on(neighbours=HEALTHY.neighbours[:1]), WARN, "no neighbour"),
    "links": (host(links=()), WARN, "no physical"),
    "ipv4": (on(ipv4_problem=CLASH, node_address_v4=None), FAIL, "overlaps"),
    "forwarding": (kernel(sysctls=FORWARDING_OFF), FAIL, "nothing crosses"),
    "router advertisements": (kernel(accept_ra={"eth0": "1"}), FAIL, "eth0 lose"),
    "ip_forward": (kernel(sysctls=IP_FORWARD), WARN, "routes IPv4 between all"),
    "fence": (kernel(rules=0), FAIL, "table 96"),
    "thunderbolt-net": (kernel(thunderbolt_net=False), FAIL, "not loaded"),
    "leftovers": (host(status=None, leftovers=["net.ipv4.conf.tb1.forwarding"]), WARN, "crashed"),
    "privilege": (host(root=False, not_read=("what a crashed babblerd left",)), WARN, "not root"),
    "leftover addresses": (
        host(status=None, stale_addresses=(("tb1", "fde0:20c6:1fa7:3b7c:8774:b3fc::1/128"),)),
        WARN,
        "left 1 mesh address, on tb1",
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_every_linux_check_has_a_fixture_that_makes_it_fail(name: str) -> None:
    facts, expected, words = FIXTURES[name]
    found = by_name(facts)[name.strip()]
    assert found.status == expected and words in found.saw, found
    assert found.do, f"{name}: says nothing to do"
    assert failed(checks(facts)) or expected != FAIL  # a failing check: exit 1


# -- macOS, from written outputs -----------------------------------------------------------------


def bus(n: int, receptacle: int, item: dict[str, str] | None) -> dict[str, object]:
    """One bus as macOS 26 prints it (keys of the real captures, docs/macos.md): a cabled
    one with its link speed and the far end in `_items`, an empty one "Up to ..."."""
    tag = {
        "current_speed_key": "40 Gb/s" if item else "Up to 40 Gb/s",
        "link_status_key": "0x2" if item else "0x100",
        "receptacle_id_key": str(receptacle),
        "receptacle_status_key": "receptacle_connected" if item
        else "receptacle_no_devices_connected",
    }  # fmt: skip
    out: dict[str, object] = {
        "_name": f"thunderboltusb4_bus_{n}",
        "device_name_key": "MacBook Pro",
        "domain_uuid_key": f"AD089FC0-E653-4FFE-B00A-DFF110B2F9A{n}",
        "receptacle_1_tag": tag,
        "route_string_key": "0",
        "switch_uid_key": f"0x05ACBE5E0678198{n}",
        "vendor_name_key": "Apple Inc.",
    }
    if item:
        out["_items"] = [item]
    return out


# Highest bus first, as macOS lists them; a dock (no domain of its own) is not a Mac.
STUDIO = {"_name": "Mac Studio", "device_name_key": "Mac15,14", "domain_uuid_key": "B-1"}
MINI = {"_name": "Mac mini", "device_name_key": "Mac16,11", "domain_uuid_key": "C-1"}
BLOCK_ALL_OFF = "Firewall has block all state set to disabled.\n"  # macOS 14 and later
PROFILE = {"SPThunderboltDataType": [
    bus(3, 4, {"_name": "a dock", "device_name_key": "a dock"}), bus(2, 3, MINI),
    bus(1, 2, None), bus(0, 1, STUDIO),
]}  # fmt: skip


class Mac:
    def __init__(self, firewall: str = "Firewall is disabled. (State = 0)") -> None:
        self.outputs = {
            ("networksetup", "-listallhardwareports"): (
                DATA / "networksetup-listallhardwareports.txt"
            ).read_text(),
            ("ifconfig",): (DATA / "ifconfig.txt").read_text(),
            ("ifconfig", "bridge0"): (DATA / "ifconfig-bridge0.txt").read_text(),
            ("system_profiler", "SPThunderboltDataType", "-json"): json.dumps(PROFILE),
            (gathering.FIREWALL, "--getglobalstate"): firewall,
            (
                gathering.FIREWALL,
                "--getblockall",
            ): "Firewall has block all state set to disabled.\n",
        }

    def run(self, args: Sequence[str]) -> str:
        if tuple(args) not in self.outputs:
            raise OSError(f"{args[0]}: not recorded")
        return self.outputs[tuple(args)]


def mac_host(mac: Mac) -> Facts:
    links, facts = gathering.mac_facts(mac.run)
    mesh = typed({"interfaces": [{"name": "en2"}, {"name": "en4"}, {"name": "en5"}],
                  "neighbours": [{"interface": "en4"}], "mesh": "running"})  # fmt: skip
    return Facts("macOS", True, "/var/run/babbler/babblerd.sock", mesh, links=links, mac=facts)


def test_the_thunderbolt_bridge_holding_ports_fails_with_the_way_out() -> None:
    found = by_name(mac_host(Mac()))
    bridge = found["thunderbolt bridge"]
    assert bridge.status == FAIL and "bridge0 holds en2 en3" in bridge.saw
    assert "sudo ifconfig bridge0 deletem en2" in bridge.do
    assert '-setnetworkserviceenabled "Thunderbolt Bridge" off' in bridge.do
    assert found["thunderbolt cables"].saw == "a Mac at the far end of en2, en4"
    assert found["link en4"].status == OK and "(Thunderbolt 3)" in found["link en4"].saw
    no_ll = found["link en5"]  # still doing DAD: not usable yet
    assert no_ll.status == FAIL and 'networksetup -setv6LinkLocal "Thunderbolt 4"' in no_ll.do
    assert found["link en2"].saw.startswith("no cable")
    assert "link en1" not in found  # Wi-Fi is no mesh link
    assert "link en6" not in found  # nor an iPhone
    assert found["firewall"].status == OK


def test_the_firewall_on_warns_and_blocking_everything_fails() -> None:
    on = by_name(mac_host(Mac("Firewall is enabled. (State = 1)")))["firewall"]
    assert on.status == WARN and "socketfilterfw --add" in on.do
    mac = Mac("Firewall is enabled. (State = 1)")
    mac.outputs[(gathering.FIREWALL, "--getblockall")] = "Block all INCOMING connections: ENABLED"
    assert by_name(mac_host(mac))["firewall"].status == FAIL
    mac.outputs.pop((gathering.FIREWALL, "--getglobalstate"))
    assert by_name(mac_host(mac))["firewall"].saw.startswith("could not read")


def test_macos_outputs_parse_and_nonsense_is_no_crash() -> None:
    ports = darwin.hardware_ports(Mac().outputs[("networksetup", "-listallhardwareports")])
    assert darwin.thunderbolt_cables(json.dumps(PROFILE), ports) == {
        "en2": True, "en3": False, "en4": True, "en5": False,
    }  # fmt: skip
    for nonsense in (
        "",
        "[]",
        '{"SPThunderboltDataType": 3}',
        "{",
        '{"SPThunderboltDataType": [1]}',
    ):
        assert darwin.thunderbolt_cables(nonsense, ports) == {}
    states = darwin.ifconfig_states((DATA / "ifconfig.txt").read_text())
    assert states["en4"] == darwin.IfconfigState(up=True, active=True, mtu=1500, link_local=True)
    assert states["en2"].active is False and not states["en2"].link_local
    assert darwin.firewall_state("gibberish") is None


def test_the_screen_form_is_one_line_per_check_with_what_to_do() -> None:
    facts, _, _ = FIXTURES["router advertisements"]
    text = render_checks(checks(facts))
    lines = text.splitlines()
    assert len(lines) == len(checks(facts))
    line = next(x for x in lines if x.startswith("fail"))
    assert "router advertisements" in line and "-> " in line and "accept_ra=2" in line
    assert all(" -> " not in x for x in lines if x.startswith("ok"))


def cabled(far_mtu: int | None, far_offer: int | None = None, age: float = 30.0) -> Status:
    """This node's tb1 cabled to n2's tb3 (each end names the other's address); n2's info
    `age` seconds old."""
    return typed(
        {
            "interfaces": [{"name": "tb1", "mtu": 65520, "max_mtu": 65520}],
            "neighbours": [{"interface": "tb1"}],
            "addresses_v4": [{"interface": "tb1", "address": "10.77.200.0", "peer": "10.77.200.1"}],
            "nodes": [
                {
                    "cables": [
                        {"interface": "tb3", "address": "10.77.200.1", "peer": "10.77.200.0"}
                    ],
                    "links": [{"name": "tb3", "mtu": far_mtu, "max_mtu": far_offer}],
                    "info_age_s": age,
                }
            ],
        }
    )


def test_the_two_ends_of_a_cable_at_different_mtus_fail() -> None:
    mtu = by_name(host(status=cabled(1500)))["mtu"]
    assert mtu.status == FAIL and "tb1 65520 against n2's tb3 1500" in mtu.saw, mtu
    assert "mtu N" in mtu.do
    assert by_name(host(status=cabled(65520)))["mtu"].saw == "both ends of 1 cable at the same MTU"
    assert "mtu" not in by_name(host(status=cabled(None)))  # a far end that does not say


def test_a_cable_babblerd_is_fitting_is_a_warning_for_a_few_seconds() -> None:
    """Right after a cable comes one end has the size both offer and the far end's news of
    its own is not here yet: said as such, not as a fault; the same long after is one."""
    fitting = by_name(host(status=cabled(1500, far_offer=65520, age=1.2)))["mtu"]
    assert fitting.status == WARN, fitting
    assert "tb1 65520 against n2's tb3 1500 as of 1.2 s ago, both to 65520" in fitting.saw
    assert "again" in fitting.do
    assert by_name(host(status=cabled(1500, far_offer=65520, age=FITTING)))["mtu"].status == FAIL
    # the far end offers less than it runs at, or nothing: no size both take, a fault at once
    assert by_name(host(status=cabled(9000, far_offer=1500, age=1.2)))["mtu"].status == FAIL
    assert by_name(host(status=cabled(1500, far_offer=None, age=1.2)))["mtu"].status == FAIL


# -- what a new user met in a lab (issue 34) -----------------------------------------------------


def test_babeld_s_version_is_said_once() -> None:
    """babeld -V says `babeld-1.12.1`, and so does babblerd's status: not "babeld babeld-"."""
    said = by_name(on(babeld=replace(BABELD, version="babeld-1.12.1")))["babeld"].saw
    assert said == "babeld 1.12.1 running (pid 7)", said
    assert (
        by_name(on(babeld=replace(BABELD, version=None)))["babeld"].saw == "babeld running (pid 7)"
    )


def test_without_babblerd_links_it_was_told_to_use_are_not_called_missing() -> None:
    """A lab node's links are veths, which babblerd uses because its --interface names them:
    with babblerd stopped the doctor cannot know them, and says so rather than "no link"."""
    found = by_name(host(status=None, status_error=GONE, links=()))
    assert found["babblerd"].status == FAIL and "not running" in found["babblerd"].saw
    assert found["links"].status == WARN, found["links"]
    assert found["links"].saw != "no physical Ethernet or Thunderbolt link"
    assert found["links"].saw.startswith("not checked: babblerd is not running"), found["links"]
    assert found["links"].do == "start babblerd, then run the doctor again"


SETTINGS = [
    f"net.{family}.conf.{link}.{name}"
    for link in ("v1x2", "v1x5")
    for family, name in [
        ("ipv6", "accept_ra"), ("ipv6", "accept_redirects"), ("ipv4", "accept_redirects"),
        ("ipv4", "send_redirects"), ("ipv4", "forwarding"), ("ipv4", "rp_filter"),
        ("ipv6", "accept_dad"), ("ipv6", "optimistic_dad"), ("ipv6", "use_optimistic"),
    ]
] + ["net.ipv6.conf.all.forwarding"]  # fmt: skip


def test_a_crash_s_kernel_settings_are_counted_in_one_short_line() -> None:
    facts = host(status=None, leftovers=sorted(SETTINGS), record="/run/lab/n1/state/sysctls")
    left = by_name(facts)["leftovers"]
    assert left.saw == (
        "a crashed babblerd left 19 kernel settings changed"
        " (sudo cat /run/lab/n1/state/sysctls lists them)"
    )
    assert left.do == "start babblerd: it puts them back"
    line = next(x for x in render_checks(checks(facts)).splitlines() if "leftovers" in x)
    assert len(line) < 200 and "net." not in line, line


def test_mesh_addresses_a_crash_left_are_said_with_how_to_remove_them() -> None:
    stale = (
        ("v1x2", "fde0:20c6:1fa7:3b7c:8774:b3fc::1/128"),
        ("v1x5", "fde0:20c6:1fa7:3b7c:8774:b3fc::2/128"),
    )
    found = by_name(host(status=None, stale_addresses=stale))["leftover addresses"]
    assert found.saw == "a crashed babblerd left 2 mesh addresses, on v1x2 and v1x5"
    assert found.do == (
        "start babblerd: it removes them (by hand: "
        "sudo ip addr del fde0:20c6:1fa7:3b7c:8774:b3fc::1/128 dev v1x2; "
        "sudo ip addr del fde0:20c6:1fa7:3b7c:8774:b3fc::2/128 dev v1x5)"
    )
    assert "leftover addresses" not in by_name(host(status=None, stale_addresses=()))


def test_the_state_dir_babbler_lab_exec_names_is_where_a_crash_s_leftovers_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`babbler-lab exec NODE -- babblerctl doctor` passes no --state-dir: the doctor reads
    the node's from BABBLER_STATE_DIR, which exec sets."""
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    record = {"boot": boot, "set": {"net/ipv6/conf/all/forwarding": ["0", "1"]}}
    (tmp_path / "sysctls").write_text(json.dumps(record))
    monkeypatch.setenv("BABBLER_STATE_DIR", str(tmp_path))
    facts = gathering.gather(tmp_path / "no.sock")
    assert facts.leftovers == ["net.ipv6.conf.all.forwarding"]
    assert facts.record == str(tmp_path / "sysctls")
    other = tmp_path / "other"
    other.mkdir()
    assert gathering.gather(tmp_path / "no.sock", state_dir=other).leftovers == []
