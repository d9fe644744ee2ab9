"""The rules that fence the mesh off (core/fence.py), checked against a small model of how
Linux walks its rules: the first rule that matches and decides wins; a `lookup` that finds
no route goes on to the next rule."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network, IPv6Network, ip_address, ip_network

import structlog.testing
import trio
from hypothesis import given
from hypothesis import strategies as st

from babbler.core import fence
from babbler.core.errors import KernelError
from babbler.core.fence import TABLE, Rule
from babbler.daemon.fence_rules import FenceRules
from tests.fakes.kernel import FakeKernel

V6 = IPv6Network("fde0:20c6:1fa7::/48")
V4 = IPv4Network("10.77.0.0/16")
MAIN = 254


def decide(
    rules: frozenset[Rule],
    iif: str,
    dst: str,
    tables: dict[int, list[str]],
    src: str | None = None,
) -> str:
    """Where a packet that came in on `iif` (`lo`: sent by this host) for `dst` goes: the
    table whose route took it, or the rule's verdict, or `main` as the host without
    babblerd. `tables` holds each table's routes (networks); main's default route is
    "0.0.0.0/0" or "::/0". `src`: another node's mesh address unless said."""
    address = ip_address(dst)
    family = address.version
    source = ip_address(src or (OTHER_V6 if family == 6 else OTHER_V4))
    for rule in sorted(r for r in rules if r.family == family):
        if rule.iif is not None and (rule.iif == iif) == rule.invert:
            continue
        if rule.dst is not None and address not in ip_network(rule.dst):
            continue
        if rule.src is not None and source not in ip_network(rule.src):
            continue
        if rule.action != "lookup":
            return rule.action
        assert rule.table is not None
        routes = [ip_network(n) for n in tables.get(rule.table, [])]
        floor = rule.suppress_prefixlength
        if any(address in n and (floor is None or n.prefixlen > floor) for n in routes):
            return "mesh" if rule.table == TABLE else "main"
    return "main"


OTHER_V6, OTHER_V4 = "fde0:20c6:1fa7:ffff:2::", "10.77.2.2"  # another node's node addresses
HOST = {  # a node with a LAN default route and one cable /31 (main), mesh routes (babeld)
    MAIN: ["0.0.0.0/0", "::/0", "10.77.200.0/31", "192.168.1.0/24"],
    TABLE: ["10.77.3.3/32", "fde0:20c6:1fa7:ffff:3::/112"],
}
MESH_V4, MESH_V6 = "10.77.3.3", "fde0:20c6:1fa7:ffff:3::1"


def test_the_host_and_the_mesh_reach_the_mesh_and_nobody_else_does() -> None:
    rules = fence.plan({"tb1", "tb2"}, V6, V4, no_forwarding_v6=True)
    for dst in (MESH_V4, MESH_V6):
        assert decide(rules, "lo", dst, HOST) == "mesh"
        assert decide(rules, "tb2", dst, HOST) == "mesh"  # forwarded across the mesh
        assert decide(rules, "eth0", dst, HOST) == "unreachable"  # a LAN host: nobody behind
    assert decide(rules, "lo", "10.77.200.1", HOST) == "main"  # the far end of our cable
    assert decide(rules, "eth0", "10.77.200.1", HOST) == "unreachable"
    assert decide(rules, "lo", "10.77.9.9", HOST) == "unreachable"  # not the LAN's gateway
    assert decide(rules, "lo", "fde0:20c6:1fa7:1::1", HOST) == "unreachable"
    assert decide(rules, "tb1", "192.168.1.7", HOST) == "unreachable"  # the mesh stays in
    assert decide(rules, "tb1", "2001:db8::1", HOST) == "unreachable"
    assert decide(rules, "lo", "192.168.1.7", HOST) == "main"  # the host's own life: as before
    assert decide(rules, "lo", "2001:db8::1", HOST) == "main"
    assert decide(rules, "eth0", "2001:db8::1", HOST) == "blackhole"  # forwarding was off
    assert decide(rules, "docker0", "2001:db8::1", HOST) == "blackhole"


def test_forwarding_the_host_did_before_and_ipv4_refused_are_left_alone() -> None:
    rules = fence.plan({"tb1"}, V6, None, no_forwarding_v6=False)
    assert decide(rules, "eth0", "2001:db8::1", HOST) == "main"  # the host routed: it still does
    assert decide(rules, "eth0", "10.77.200.1", HOST) == "main"  # IPv4 refused: the host's
    assert decide(rules, "lo", "10.77.9.9", HOST) == "main"
    assert decide(rules, "eth0", MESH_V6, HOST) == "unreachable"
    assert not any(r.action == "blackhole" for r in rules)


def test_with_no_mesh_link_the_host_still_reaches_what_babeld_installed() -> None:
    rules = fence.plan(set(), V6, V4, no_forwarding_v6=False)
    assert decide(rules, "lo", MESH_V4, HOST) == "mesh"
    assert {r.iif for r in rules if r.action == "lookup"} == {"lo"}
    assert (
        str(min(rules)) == "-4 pref 6697 iif lo to 10.77.0.0/16 lookup 254 suppress_prefixlength 0"
    )


def test_a_cable_is_reached_over_itself_while_plugged_and_by_its_detour_while_out() -> None:
    """A pulled cable's far end is announced from its loopback (a /32 in babeld's table, and
    after the cable is back its retraction, `unreachable`, for up to a minute): while the
    /31 is back in main, main's connected route wins; while it is not, the detour."""
    rules = fence.plan({"tb1", "tb2"}, V6, V4, no_forwarding_v6=False)
    detour = {MAIN: HOST[MAIN], TABLE: [*HOST[TABLE], "10.77.200.1/32"]}
    assert decide(rules, "lo", "10.77.200.1", detour) == "main"  # plugged in: over it
    out = {MAIN: ["0.0.0.0/0", "192.168.1.0/24"], TABLE: detour[TABLE]}
    assert decide(rules, "lo", "10.77.200.1", out) == "mesh"  # pulled: through the mesh
    assert decide(rules, "tb2", "10.77.200.1", out) == "mesh"  # forwarded on the way


# What a stranger cabled to a node announced (issue 29), had it reached babeld's table:
# defaults and other prefixes. babeld's `in` filters keep them out; the rules must not send
# the host's traffic there even if they got in.
TAKEN = {
    MAIN: HOST[MAIN],
    TABLE: [*HOST[TABLE], "::/0", "0.0.0.0/0", "2001:db8:77::2/128", "192.0.2.2/32"],
}
# This node: its range, its IPv4 node address and its end of the cable /31 10.77.200.0/31.
OWN = fence.Own(
    IPv6Network("fde0:20c6:1fa7:ffff:1::/112"),
    IPv4Address("10.77.1.1"),
    (IPv4Address("10.77.200.0"),),
)


def test_routes_outside_the_mesh_in_babelds_table_take_none_of_the_hosts_traffic() -> None:
    rules = fence.plan({"tb1"}, V6, V4, no_forwarding_v6=False, own=OWN)
    for dst in ("2001:db8:77::2", "2001:db8::1", "192.0.2.2", "192.168.1.7", "8.8.8.8"):
        assert decide(rules, "lo", dst, TAKEN) == "main", dst  # the host's own routes
        assert decide(rules, "tb1", dst, TAKEN) == "unreachable", dst  # nor the mesh's
    assert decide(rules, "lo", MESH_V6, TAKEN) == "mesh"
    assert decide(rules, "tb1", MESH_V4, TAKEN) == "mesh"


def test_sources_outside_the_mesh_or_of_this_node_are_not_forwarded_into_it() -> None:
    rules = fence.plan({"tb1", "tb2"}, V6, V4, no_forwarding_v6=False, own=OWN)
    assert decide(rules, "tb1", MESH_V6, HOST) == "mesh"  # another node's traffic: carried
    assert decide(rules, "tb1", MESH_V6, HOST, src="2001:db8::9") == "unreachable"
    assert decide(rules, "tb1", MESH_V4, HOST, src="192.0.2.9") == "unreachable"
    assert decide(rules, "tb1", MESH_V6, HOST, src="fde0:20c6:1fa7:ffff:1::") == "blackhole"
    assert decide(rules, "tb2", MESH_V6, HOST, src="fde0:20c6:1fa7:ffff:1::3") == "blackhole"
    assert decide(rules, "tb1", MESH_V4, HOST, src="10.77.1.1") == "blackhole"
    assert decide(rules, "tb2", MESH_V4, HOST, src="10.77.200.0") == "blackhole"  # our cable end
    assert decide(rules, "tb1", MESH_V4, HOST, src="10.77.200.1") == "mesh"  # the far end's
    assert decide(rules, "lo", MESH_V6, HOST, src="fde0:20c6:1fa7:ffff:1::") == "mesh"


def test_with_a_key_only_links_with_a_neighbour_forward_into_the_mesh() -> None:
    rules = fence.plan({"tb1", "tb2"}, V6, V4, no_forwarding_v6=False, own=OWN, carrying={"tb1"})
    for dst in (MESH_V6, MESH_V4):
        assert decide(rules, "tb1", dst, HOST) == "mesh"
        assert decide(rules, "tb2", dst, HOST) == "unreachable"  # an outsider's cable
        assert decide(rules, "lo", dst, HOST) == "mesh"  # the host's own: always
    ruled = fence.plan({"tb1"}, V6, V4, no_forwarding_v6=False, carrying={"tb1", "gone0"})
    assert not any(r.iif == "gone0" for r in ruled)  # a neighbour's link that left the mesh


def test_a_neighbour_at_this_nodes_own_link_local_carries_nothing() -> None:
    """babeld lists a neighbour once its HMAC checks out, before the replay check: a node's
    own signed hello sent back on its cable makes one, at the node's own link-local."""
    neighbours = [("tb1", "fe80::2"), ("tb2", "fe80::a1"), ("tb3", "fe80::3")]
    assert fence.carrying(neighbours, ["fe80::a1", "fe80::a3"]) == {"tb1", "tb3"}


names = st.sets(st.sampled_from(["tb1", "tb2", "en0", "enp1s0", "eth0", "wlan0"]), max_size=4)
destinations = st.sampled_from(
    [MESH_V4, MESH_V6, "10.77.200.1", "10.77.9.9", "192.168.1.7", "2001:db8::1", "8.8.8.8"]
)


@given(
    names, st.booleans(), st.booleans(), st.sampled_from(["eth0", "wlan0", "veth9"]), destinations
)
def test_nothing_from_another_link_reaches_the_mesh_and_nothing_leaves_it(
    mesh: set[str], ipv4_on: bool, was_off: bool, outsider: str, dst: str
) -> None:
    mesh = mesh - {outsider}
    rules = fence.plan(mesh, V6, V4 if ipv4_on else None, no_forwarding_v6=was_off, own=OWN)
    assert decide(rules, outsider, dst, HOST) != "mesh"
    if ip_address(dst) in (V6 if ":" in dst else V4):
        assert decide(rules, outsider, dst, HOST) != "main" or (not ipv4_on and "." in dst)
    for link in mesh:
        assert decide(rules, link, dst, HOST) in ("mesh", "unreachable")
    assert all(fence.PRIORITY <= r.priority <= fence.LAST_PRIORITY for r in rules)


class FailingKernel(FakeKernel):
    async def add_rule(self, rule: Rule) -> None:
        raise KernelError("Operation not permitted", 1)


def test_rules_left_by_a_crash_are_taken_over_and_a_failure_is_said_once() -> None:
    kernel = FakeKernel()
    stale = Rule(6, fence.PRIORITY + 1, "unreachable", iif="gone0")
    kernel.rules = {stale}
    wanted = fence.plan({"tb1"}, V6, V4, no_forwarding_v6=False)

    async def run() -> None:
        rules = FenceRules(kernel)
        await rules.add(wanted)
        assert kernel.rules == wanted | {stale}  # added before anything goes
        await rules.apply(wanted)
        assert kernel.rules == wanted
        await rules.apply(frozenset())
        assert kernel.rules == set()
        failing = FenceRules(FailingKernel())
        for _ in range(3):
            await failing.apply(wanted)

    with structlog.testing.capture_logs() as logs:
        trio.run(run)
    said = [e for e in logs if e["event"] == "cannot add rule"]
    assert len(said) == len(wanted), said  # once each, not once per reconcile
