"""Each cable's MTU (core/mtu.py): both ends settle on the largest size both take, from
nothing but each other's offers; hostile or missing offers move nothing."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from babbler.core import farend, mtu
from babbler.core.links import Link
from tests.unit.test_farend import babeld_table

ME, FAR = "aaaaaaaaaaaa", "bbbbbbbbbbbb"

sizes = st.integers(mtu.MIN_MTU, mtu.MAX_MTU)
settings = st.one_of(st.none(), sizes)


@st.composite
def ends(draw: st.DrawFn) -> tuple[Link, int | None]:
    largest = draw(st.one_of(st.none(), sizes))
    now = draw(sizes if largest is None else st.integers(mtu.MIN_MTU, largest))
    name = draw(st.sampled_from(["thunderbolt0", "en5", "eth1"]))
    return Link(name, 2, mtu=now, max_mtu=largest), draw(settings)


def settle(link: Link, setting: int | None, far_offer: int | None) -> Link:
    far = {} if far_offer is None else {link.name: far_offer}
    size = mtu.targets([link], setting, far).get(link.name)
    return link if size is None else replace(link, mtu=size)


@given(ends(), ends())
def test_two_sized_ends_agree_on_the_smaller_offer_at_once_and_stay(
    a: tuple[Link, int | None], b: tuple[Link, int | None]
) -> None:
    (link_a, set_a), (link_b, set_b) = a, b
    offer_a, offer_b = mtu.offer(link_a, set_a), mtu.offer(link_b, set_b)
    new_a, new_b = settle(link_a, set_a, offer_b), settle(link_b, set_b, offer_a)
    if mtu.sized(link_a, set_a) and mtu.sized(link_b, set_b):
        assert new_a.mtu == new_b.mtu == min(offer_a or 0, offer_b or 0)
    for old, new, setting in ((link_a, new_a, set_a), (link_b, new_b, set_b)):
        if not mtu.sized(old, setting):
            assert new == old  # a link babblerd does not size keeps its size
        assert new.mtu is not None and new.mtu <= (old.max_mtu or old.mtu or 0)
        if setting is not None:
            assert new.mtu <= setting or new.mtu == old.mtu
    # Offers do not follow the size a link runs at: a second round changes nothing.
    assert settle(new_a, set_a, mtu.offer(new_b, set_b)) == new_a
    assert settle(new_b, set_b, mtu.offer(new_a, set_a)) == new_b


def test_auto_sizes_thunderbolt_only_and_a_size_caps_every_link() -> None:
    tb = Link("thunderbolt0", 2, mtu=1500, max_mtu=65520)
    eth = Link("eth1", 3, mtu=1500, max_mtu=9216)
    assert mtu.offer(tb, mtu.AUTO) == 65520 and mtu.offer(eth, mtu.AUTO) == 1500
    far = {"thunderbolt0": 9000, "eth1": 9000}
    assert mtu.targets([tb, eth], mtu.AUTO, far) == {"thunderbolt0": 9000}
    assert mtu.targets([tb, eth], 4000, far) == {"thunderbolt0": 4000, "eth1": 4000}
    assert mtu.offer(Link("thunderbolt0", 2, mtu=1500), mtu.AUTO) == 1500  # largest not said


def info(neighbours: list[Any], interfaces: list[Any]) -> dict[str, Any]:
    return {"neighbours": neighbours, "interfaces": interfaces}


def far_offers(
    mine: dict[str, str],
    infos: list[tuple[str, Any]],
    babeld: dict[str, set[str]],
    me: str,
) -> dict[str, int]:
    """The far ends' offers (core/farend.py, then core/mtu.py): `mine`, our links'
    link-locals; `babeld`, link -> the nodes babeld has as neighbours there."""
    there = [
        (int(n, 16), f"fe80::99:{i}", link, 0)
        for i, (link, nodes) in enumerate(babeld.items())
        for n in nodes
    ]
    ends = farend.far_ends(babeld_table(mine, there), infos, me)
    return mtu.far_offers(ends, dict(infos))


def test_the_far_end_is_the_node_listing_this_links_link_local() -> None:
    """Two parallel cables to one node find their own far ends; a node that listed the
    link-local once but is not babeld's neighbour there now is not asked."""
    mine = {"tb0": "fe80::1", "tb1": "fe80::2"}
    far = info(
        [
            {"node_id": ME, "interface": "thunderbolt1", "address": "fe80::2"},
            {"node_id": None, "interface": "thunderbolt0", "address": "fe80::1"},
        ],
        [{"name": "thunderbolt0", "max_mtu": 9000}, {"name": "thunderbolt1", "max_mtu": 65520}],
    )
    stale = info(
        [{"node_id": ME, "interface": "en0", "address": "fe80::1"}],
        [{"name": "en0", "max_mtu": 1500}],
    )
    infos = [(FAR, far), ("cccccccccccc", stale)]
    assert far_offers(mine, infos, {"tb0": {FAR}}, ME) == {"tb0": 9000, "tb1": 65520}
    assert far_offers(mine, infos, {}, ME)["tb0"] == 1500  # who is there unknown: the smaller


def test_hostile_or_silent_offers_move_nothing() -> None:
    mine = {"tb0": "fe80::1"}
    for said in (None, 0, 68, 1279, 65536, "9000", True, 9000.0, [9000]):
        hostile = info(
            [{"node_id": None, "interface": "tb9", "address": "fe80::1"}],
            [{"name": "tb9", "max_mtu": said}],
        )
        assert far_offers(mine, [(FAR, hostile)], {}, ME) == {}
    for nonsense in ({}, {"neighbours": "x", "interfaces": 3}, info([None, 1], [None, "x"])):
        assert far_offers(mine, [(FAR, nonsense)], {}, ME) == {}
    someone_else = info(
        [{"node_id": "dddddddddddd", "interface": "tb9", "address": "fe80::1"}],
        [{"name": "tb9", "max_mtu": 9000}],
    )
    assert far_offers(mine, [(FAR, someone_else)], {}, ME) == {}  # not facing this node
