"""Interface eligibility over recorded link snapshots, the link diff and the address plan."""

from dataclasses import replace
from ipaddress import IPv4Interface, IPv6Address

from babbler.core.addressing import interface_address, next_free_index, node_range
from babbler.core.addrplan import IndexBook, plan, plan_v4, wanted_addresses
from babbler.core.links import AddressChange, Link, Selector, diff, usable_names

# As seen on real machines (BABELD.md "Linux interface facts").
ETH = Link("enp3s0", 2, has_device=True, driver="virtio_net", up=True, link_local=True)
THUNDERBOLT = Link("thunderbolt0", 3, driver="thunderbolt-net", up=True, link_local=True)
WIFI = Link("wlan0", 4, has_device=True, wireless=True, up=True, link_local=True)
VETH = Link("v1x2", 5, kind="veth", up=True, link_local=True)
BRIDGE = Link("br0", 6, kind="bridge", up=True, link_local=True)
ENSLAVED = Link("enp4s0", 7, has_device=True, master=6, up=True, link_local=True)
VLAN = Link("enp3s0.10", 8, kind="vlan", up=True, link_local=True)
LOOPBACK = Link("lo", 1, arp_type=772, up=True)
DOWN = Link("eth1", 9, has_device=True, up=False, link_local=False)
TENTATIVE = Link("eth2", 10, has_device=True, up=True, link_local=False)
ALL = {
    ln.name: ln
    for ln in (ETH, THUNDERBOLT, WIFI, VETH, BRIDGE, ENSLAVED, VLAN, LOOPBACK, DOWN, TENTATIVE)
}


def test_default_selection_is_physical_wired_links_only() -> None:
    selector = Selector()
    assert {n for n, ln in ALL.items() if selector.selects(ln)} == {
        "enp3s0",
        "thunderbolt0",
        "eth1",
        "eth2",
    }
    assert usable_names(ALL, selector) == {"enp3s0", "thunderbolt0"}


def test_categories() -> None:
    assert ETH.category == "ethernet"
    assert THUNDERBOLT.category == "thunderbolt"
    assert VETH.category == "other"


def test_interface_globs_select_exactly_and_exclude_wins() -> None:
    selector = Selector(interface=("v*", "br*"), exclude=("br*",))
    assert usable_names(ALL, selector) == {"v1x2"}
    assert usable_names(ALL, Selector(exclude=("thunder*",))) == {"enp3s0"}


def test_diff_names_what_changed() -> None:
    old = {"enp3s0": ETH, "v1x2": VETH}
    new = {"enp3s0": Link(**{**ETH.__dict__, "up": False}), "wlan0": WIFI}
    change = diff(old, new)
    assert change.added == ("wlan0",) and change.removed == ("v1x2",)
    assert change.changed == (("enp3s0", ("up",)),)
    assert diff(new, new).reasons() == [] and not diff(new, new)


NODE = 0x1A2B3C4D5E6F
MINE = interface_address(NODE, 1)
STALE = IPv6Address("fde0:20c6:1fa7:1::5")
FOREIGN = IPv6Address("fd00::5")


def with_addresses(link: Link, *addresses: IPv6Address) -> Link:
    return Link(**{**link.__dict__, "addresses": frozenset(addresses)})


def test_plan_adds_own_removes_stale_and_leaves_foreign() -> None:
    snapshot = {"v1x2": with_addresses(VETH, STALE, FOREIGN)}
    selector, book = Selector(interface=("v*",)), IndexBook(next_free_index)
    wanted = wanted_addresses(snapshot, selector, NODE, book, active=True)
    assert wanted == {"v1x2": MINE}
    result = plan(snapshot, selector, NODE, wanted)
    assert result.add == (AddressChange("v1x2", 5, MINE, deprecated=True),)
    assert result.remove == (AddressChange("v1x2", 5, STALE),)


def test_link_addresses_are_not_preferred_sources_and_the_node_address_is() -> None:
    """So that connections leave from the node address and outlive a pulled cable."""
    node_address = node_range(NODE).network_address
    wanted = {"lo": node_address, "v1x2": MINE}
    preferred = {"lo": with_addresses(LOOPBACK, node_address), "v1x2": with_addresses(VETH, MINE)}
    result = plan(preferred, Selector(interface=("v*",)), NODE, wanted)
    assert result.add == (AddressChange("v1x2", 5, MINE, deprecated=True),)  # made so
    settled = {**preferred, "v1x2": replace(preferred["v1x2"], deprecated=frozenset({MINE}))}
    assert not plan(settled, Selector(interface=("v*",)), NODE, wanted)


def test_ipv4_plan_adds_what_is_wanted_and_removes_only_what_babbler_recorded() -> None:
    node = IPv4Interface("10.77.44.75/32")
    cable = IPv4Interface("10.77.168.98/31")
    old_cable = IPv4Interface("10.77.200.4/31")
    theirs = IPv4Interface("10.77.9.9/24")  # the host's own, inside the prefix: never touched
    links = {
        "lo": replace(LOOPBACK, addresses_v4=frozenset({node})),
        "v1x2": replace(VETH, addresses_v4=frozenset({old_cable, theirs})),
    }
    wanted = {"lo": {node}, "v1x2": {cable}}
    recorded = frozenset({("lo", node), ("v1x2", old_cable), ("v9", old_cable)})
    result = plan_v4(links, wanted, recorded)
    assert result.add == (AddressChange("v1x2", 5, cable.ip, 31),)
    assert result.remove == (AddressChange("v1x2", 5, old_cable.ip, 31),)
    idle = plan_v4(links, {}, frozenset({("lo", node)}))
    assert idle.remove == (AddressChange("lo", 1, node.ip, 32),) and idle.add == ()


def test_inactive_plan_removes_own_addresses_everywhere_but_not_foreign_mesh_ones() -> None:
    # Own-range addresses are ours wherever they are; other mesh addresses only on our links.
    other = Link(
        "eth9",
        11,
        kind="dummy",
        up=True,
        link_local=True,
        addresses=frozenset({interface_address(NODE, 7), STALE}),
    )
    snapshot = {"v1x2": with_addresses(VETH, MINE), "eth9": other}
    result = plan(snapshot, Selector(interface=("v*",)), NODE, {})
    assert set(result.remove) == {
        AddressChange("v1x2", 5, MINE),
        AddressChange("eth9", 11, interface_address(NODE, 7)),
    }
    assert result.add == ()


def test_numbers_are_kept_for_life_and_adopted_from_a_previous_run() -> None:
    book = IndexBook(next_free_index)
    selector = Selector(interface=("v*",))
    left_behind = with_addresses(
        Link("v1x3", 6, kind="veth", up=True, link_local=True), interface_address(NODE, 9)
    )
    snapshot = {"v1x2": VETH, "v1x3": left_behind}
    wanted = wanted_addresses(snapshot, selector, NODE, book, active=True)
    assert wanted == {"v1x2": interface_address(NODE, 1), "v1x3": interface_address(NODE, 9)}
    # v1x2 disappears and comes back with another kernel index: same number.
    again = wanted_addresses(
        {"v1x2": Link(**{**VETH.__dict__, "index": 42})}, selector, NODE, book, active=True
    )
    assert again == {"v1x2": interface_address(NODE, 1)}


def test_a_killed_runs_address_seen_while_idle_is_the_one_the_link_gets_back() -> None:
    # babblerd's first reconcile runs before the mesh does: it removes what a killed run
    # left, and the link must get the same address back (numbers are random now).
    book, selector = IndexBook(), Selector(interface=("v*",))
    left = {"v1x2": with_addresses(VETH, interface_address(NODE, 4242))}
    idle = plan(left, selector, NODE, wanted_addresses(left, selector, NODE, book, False))
    assert idle.remove == (AddressChange("v1x2", 5, interface_address(NODE, 4242)),)
    running = wanted_addresses({"v1x2": VETH}, selector, NODE, book, active=True)
    assert running == {"v1x2": interface_address(NODE, 4242)}


def test_two_machines_with_one_node_id_give_their_links_different_addresses() -> None:
    # Cloned disks: each must announce an address the other does not, or with two nodes
    # between them neither sees a route into its range from the other (core/collision.py).
    selector = Selector(interface=("v*",))
    numbered = {
        wanted_addresses({"v1x2": VETH}, selector, NODE, IndexBook(), active=True)["v1x2"]
        for _ in range(20)
    }
    assert len(numbered) > 1
    assert all(a in node_range(NODE) and a != node_range(NODE).network_address for a in numbered)


def test_loopback_holds_the_node_address_while_active_and_loses_it_after() -> None:
    node_address = node_range(NODE).network_address
    snapshot = {"lo": LOOPBACK, "v1x2": VETH}
    selector, book = Selector(interface=("v*",)), IndexBook(next_free_index)
    wanted = wanted_addresses(snapshot, selector, NODE, book, active=True)
    assert wanted == {"lo": node_address, "v1x2": MINE}
    holding = {"lo": with_addresses(LOOPBACK, node_address), "v1x2": VETH}
    idle = plan(holding, selector, NODE, wanted_addresses(holding, selector, NODE, book, False))
    assert idle.remove == (AddressChange("lo", 1, node_address),)


def test_a_node_address_of_another_id_is_removed_from_loopback() -> None:
    old = node_range(0x0A0B0C0D0E0F).network_address  # given up after a collision
    snapshot = {"lo": with_addresses(LOOPBACK, old)}
    result = plan(snapshot, Selector(), NODE, {})
    assert result.remove == (AddressChange("lo", 1, old),)


def test_a_link_that_stops_saying_its_speed_keeps_its_cost() -> None:
    from dataclasses import replace

    from babbler.core.cost import link_cost
    from babbler.core.links import keep_speeds

    up = Link("eth1", 3, has_device=True, up=True, speed_mbps=10_000)
    down = replace(up, up=False, speed_mbps=None)  # no carrier: the kernel says no speed
    kept = keep_speeds({"eth1": down}, {"eth1": up})["eth1"]
    assert kept.speed_mbps == 10_000 and link_cost(kept) == link_cost(up) == 32
    other = replace(down, index=9)  # another link by that name since: nothing to keep
    assert keep_speeds({"eth1": other}, {"eth1": up})["eth1"].speed_mbps is None


def test_a_cable_address_label_is_never_its_links_name_and_fits_linux() -> None:
    from babbler.core.platform import cable_address_label

    for name in ("v1x2", "eth0", "thunderbolt1x2", "enp5s0f0np0abcd"):
        label = cable_address_label(name)
        assert label != name and len(label) <= 15 and label.endswith(":m")
    assert cable_address_label("v1x2") == "v1x2:m"
