"""A pulled cable's address and its detour (ipv4_service.DETOUR_HOLD, DESIGN.md "IPv4"):
while the cable is out its address moves to the loopback as a /32 (labelled as a cable's,
never as the node address), which babeld announces, and no new job is offered it; it goes
back onto the cable when the cable is back, and is let go after DETOUR_HOLD. Where babeld's
routes share the main table (macOS) nothing is held: the address goes with its cable."""

from __future__ import annotations

from ipaddress import IPv4Interface, IPv4Network
from pathlib import Path

import trio
import trio.testing

from babbler.core.links import ARPHRD_LOOPBACK, Link, Selector
from babbler.core.table import MeshTable
from babbler.daemon.ipv4 import Ipv4
from babbler.daemon.ipv4_service import CABLE_HOLD, DETOUR_HOLD, Ipv4Service
from tests.fakes.kernel import FakeKernel
from tests.unit.recorded import table_of

PREFIX = IPv4Network("10.77.0.0/16")
SELECTOR = Selector(("v*",))


CABLED = table_of(
    "add interface v1x2 up true ipv6 fe80::1",
    "add neighbour 1 address fe80::2 if v1x2 reach ffff rxcost 96 txcost 96 cost 96",
)
LOOPBACK = Link("lo", 1, arp_type=ARPHRD_LOOPBACK, up=True)


def links(plugged: bool) -> dict[str, Link]:
    cable = Link("v1x2", 2, up=plugged, link_local=plugged)
    return {"lo": LOOPBACK, "v1x2": cable}


def service(tmp_path: Path, detours: bool) -> Ipv4Service:
    state = Ipv4(PREFIX, tmp_path, node_id=1)
    return Ipv4Service(state, FakeKernel(), restart=lambda why: None, detours=detours)


async def held_on(ipv4: Ipv4Service, plugged: bool, babeld: MeshTable) -> dict[str, set[str]]:
    """What the plan adds but the node address, by interface: address/prefix, `held`
    marked."""
    todo = await ipv4.plan(links(plugged), SELECTOR, True, babeld)
    out: dict[str, set[str]] = {}
    for change in todo.add:
        if change.address == ipv4.state.node_address:
            assert not change.held
            continue
        mark = " held" if change.held else ""
        out.setdefault(change.interface, set()).add(f"{change.address}/{change.prefixlen}{mark}")
    return out


async def test_a_pulled_cable_keeps_its_address_on_the_loopback_until_it_is_back(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    ipv4 = service(tmp_path, detours=True)
    first = await held_on(ipv4, True, CABLED)
    (cable,) = ipv4.cables
    assert first == {"v1x2": {f"{cable.address}/31"}}
    ipv4.applied(())
    await trio.sleep(1)
    pulled = await held_on(ipv4, False, table_of())  # babeld lost the neighbour with the link
    assert pulled == {"lo": {f"{cable.address}/32 held"}}  # not labelled as the node address
    assert ipv4.view()["addresses_v4"] == []  # no new job is offered a cable that is out
    assert ipv4.next_expiry() == DETOUR_HOLD  # from when babeld last had the cable (t=0)
    assert ("lo", IPv4Interface(f"{cable.address}/32")) in ipv4.state.recorded  # gone at stop
    ipv4.applied(())
    await trio.sleep(DETOUR_HOLD - 10)  # back after 50 s: past CABLE_HOLD, within the detour
    back = await held_on(ipv4, True, table_of())  # before babeld met the far end again
    assert back == {"v1x2": {f"{cable.address}/31"}}
    assert ipv4.view()["addresses_v4"][0]["address"] == str(cable.address)


async def test_a_cable_that_stays_out_is_let_go_after_the_detour_hold(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    ipv4 = service(tmp_path, detours=True)
    await held_on(ipv4, True, CABLED)
    (cable,) = ipv4.cables
    ipv4.applied(())
    await held_on(ipv4, False, table_of())
    ipv4.applied(())
    held = IPv4Interface(f"{cable.address}/32")
    node = IPv4Interface(f"{ipv4.state.node_address}/32")
    now = links(False) | {
        "lo": Link("lo", 1, ARPHRD_LOOPBACK, up=True, addresses_v4=frozenset({node, held}))
    }
    await trio.sleep(DETOUR_HOLD - 1)
    assert (await ipv4.plan(now, SELECTOR, True, table_of())).remove == ()
    await trio.sleep(1)
    todo = await ipv4.plan(now, SELECTOR, True, table_of())
    assert [(c.interface, c.address) for c in todo.remove] == [("lo", cable.address)]
    assert ipv4.cables == []


async def test_without_detours_the_address_goes_with_its_cable(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    ipv4 = service(tmp_path, detours=False)
    await held_on(ipv4, True, CABLED)
    ipv4.applied(())
    assert await held_on(ipv4, False, table_of()) == {}
    assert ipv4.cables == [] and ipv4.next_expiry() > CABLE_HOLD * 100
