"""The live model `top` and the page share: nodes and cables from status, rates from two
counters answers, changes held HOLD seconds."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from babbler.live.mesh import HOLD, STALE_S, Changes, Live, MeshView, Rates, as_json, view

IDS = ["00000000000a", "00000000000b", "00000000000c", "00000000000d", "00000000000e"]


def ring_status(
    names: list[str], *, down: frozenset[str] = frozenset(), cut: frozenset[int] = frozenset()
) -> dict[str, Any]:
    """The first node's status of a ring of len(names) nodes: cable i joins node i (its
    link `v<i>n`) and node i+1 (its link `v<i+1>p`), on 10.0.i.0/31; `cut` cables are gone
    (neither end lists it), `down` node ids unreachable."""
    count = len(names)
    ends: dict[int, list[dict[str, str]]] = {i: [] for i in range(count)}
    links: dict[int, list[dict[str, Any]]] = {i: [] for i in range(count)}
    for i in range(count):
        j = (i + 1) % count
        if i in cut:
            continue
        ends[i].append({"interface": f"v{i}n", "address": f"10.0.{i}.0", "peer": f"10.0.{i}.1"})
        ends[j].append({"interface": f"v{j}p", "address": f"10.0.{i}.1", "peer": f"10.0.{i}.0"})
        links[i].append({"name": f"v{i}n", "speed_mbps": 10000, "mtu": 1500, "cost": 32})
        links[j].append({"name": f"v{j}p", "speed_mbps": 1000, "mtu": 9000, "cost": 32})
    nodes = [
        {
            "node_id": IDS[i],
            "name": names[i],
            "version": "0.1.0",
            "node_address": f"fde0::{i}:0",
            "node_address_v4": f"10.77.0.{i}",
            "reachable": IDS[i] not in down,
            "hops": min(i, count - i),
            "interface": "v0n" if i <= count // 2 else "v0p",
            "info_age_s": 1.5,
            "cables": ends[i],
            "links": links[i],
        }
        for i in range(1, count)
    ]
    return {
        "node_id": IDS[0],
        "name": names[0],
        "version": "0.1.0",
        "node_address": "fde0::0:0",
        "node_address_v4": "10.77.0.0",
        "addresses_v4": ends[0],
        "interfaces": links[0],
        "nodes": nodes,
    }


def counters(node_id: str, at: float, **by_link: tuple[int, int]) -> dict[str, Any]:
    """A `counters` answer holding one node: (rx_bytes, tx_bytes) per link."""
    listed = [
        {"name": name, "rx_bytes": rx, "tx_bytes": tx, "rx_packets": 0, "tx_packets": 0}
        for name, (rx, tx) in by_link.items()
    ]
    return {"at": at, "nodes": [{"node_id": node_id, "at": at, "age_s": 0.0, "interfaces": listed}]}


def test_nodes_me_first_then_by_name_with_their_state() -> None:
    mesh = view(ring_status(["me", "zed", "alf", "bob"], down=frozenset({IDS[3]})), Rates(), [])
    assert [(n.name, n.state, n.hops) for n in mesh.nodes] == [
        ("me", "me", 0),
        ("alf", "up", 2),
        ("bob", "down", None),
        ("zed", "up", 1),
    ]
    assert mesh.me == IDS[0]
    assert mesh.nodes[1].address == "fde0::2:0" and mesh.nodes[1].address_v4 == "10.77.0.2"


def test_every_cable_once_with_both_ends_speed_and_mtu() -> None:
    mesh = view(ring_status(["n1", "n2", "n3", "n4"]), Rates(), [])
    ends = {(c.a.name, c.a.interface, c.b.name, c.b.interface) for c in mesh.cables}
    assert ends == {
        ("n1", "v0n", "n2", "v1p"),
        ("n2", "v1n", "n3", "v2p"),
        ("n3", "v2n", "n4", "v3p"),
        ("n1", "v0p", "n4", "v3n"),  # the lower node id's end first
    }
    assert {(c.speed_mbps, c.mtu) for c in mesh.cables} == {(1000, 1500)}  # the lesser end's
    assert all(c.a_to_b is None and c.b_to_a is None for c in mesh.cables)  # no readings yet


def test_a_cable_to_a_node_that_is_down_is_not_listed() -> None:
    mesh = view(ring_status(["n1", "n2", "n3", "n4"], down=frozenset({IDS[2]})), Rates(), [])
    assert {(c.a.name, c.b.name) for c in mesh.cables} == {("n1", "n2"), ("n1", "n4")}


def test_rates_each_way_from_the_sender_and_busiest_first() -> None:
    rates = Rates()
    rates.update(counters(IDS[1], 100.0, v1n=(0, 0), v1p=(0, 0)))
    rates.update(counters(IDS[1], 102.0, v1n=(2000, 8000), v1p=(4, 6)))
    mesh = view(ring_status(["n1", "n2", "n3", "n4"]), rates, [])
    first = mesh.cables[0]
    assert (first.a.name, first.b.name) == ("n2", "n3")
    assert (first.a_to_b, first.b_to_a) == (4000.0, 1000.0)  # n2's tx, then n2's rx
    second = mesh.cables[1]
    assert (second.a.name, second.b.name) == ("n1", "n2")
    assert (second.a_to_b, second.b_to_a) == (2.0, 3.0)  # n2's rx (n1 has no reading), tx
    assert [c.a_to_b for c in mesh.cables[2:]] == [None, None]


def test_cables_busiest_first_then_by_names() -> None:
    rates = Rates()
    for at, sent in ((10.0, 0), (11.0, 500)):
        rates.update(counters(IDS[0], at, v0n=(0, 0), v0p=(0, sent)))
    mesh = view(ring_status(["n1", "n2", "n3", "n4"]), rates, [])
    assert [(c.a.name, c.b.name) for c in mesh.cables] == [
        ("n1", "n4"),
        ("n1", "n2"),
        ("n2", "n3"),
        ("n3", "n4"),
    ]


READING = st.tuples(
    st.sampled_from(IDS[:2]),
    st.floats(0, 1e6, allow_nan=False),
    st.integers(0, 2**64 - 1),
    st.integers(0, 2**64 - 1),
)


@given(st.lists(READING, max_size=30))
def test_rates_are_never_negative(readings: list[tuple[str, float, int, int]]) -> None:
    rates = Rates()
    for node_id, at, rx, tx in readings:
        rates.update(counters(node_id, at, eth0=(rx, tx)))
        for other in IDS[:2]:
            rate = rates.rate(other, "eth0")
            assert rate is None or (rate[0] >= 0 and rate[1] >= 0)


@given(st.lists(READING, min_size=1, max_size=30))
def test_readings_of_two_nodes_are_never_mixed(readings: list[tuple[str, float, int, int]]) -> None:
    """Both nodes name their link eth0 and are read in turns: each node's rate is the one
    of its own last two readings, as if the other had never been read."""
    rates = Rates()
    own: dict[str, list[tuple[float, int, int]]] = {i: [] for i in IDS[:2]}
    for node_id, at, rx, tx in readings:
        answer = counters(node_id, at, eth0=(rx, tx))
        answer["at"] = 0.0  # the viewer's clock stands still: the node left out is not stale
        rates.update(answer)
        own[node_id].append((at, rx, tx))
    node_id = readings[-1][0]
    alone = Rates()
    for at, rx, tx in own[node_id]:
        alone.update(counters(node_id, at, eth0=(rx, tx)))
    assert rates.rate(node_id, "eth0") == alone.rate(node_id, "eth0")


def test_a_counter_that_went_down_is_a_new_start() -> None:
    rates = Rates()
    rates.update(counters(IDS[0], 1.0, eth0=(1000, 1000)))
    rates.update(counters(IDS[0], 2.0, eth0=(3000, 1500)))
    assert rates.rate(IDS[0], "eth0") == (2000.0, 500.0)
    rates.update(counters(IDS[0], 3.0, eth0=(10, 1600)))  # rx reset: the link was made anew
    assert rates.rate(IDS[0], "eth0") is None
    rates.update(counters(IDS[0], 4.0, eth0=(110, 1700)))
    assert rates.rate(IDS[0], "eth0") == (100.0, 100.0)


def test_a_clock_that_went_back_is_a_new_start() -> None:
    rates = Rates()
    rates.update(counters(IDS[0], 500.0, eth0=(0, 0)))
    rates.update(counters(IDS[0], 501.0, eth0=(10, 10)))
    rates.update(counters(IDS[0], 3.0, eth0=(20, 20)))  # the node rebooted
    assert rates.rate(IDS[0], "eth0") is None


def test_the_same_reading_again_keeps_the_rate_and_a_stale_one_drops_it() -> None:
    rates = Rates()
    rates.update(counters(IDS[1], 1.0, eth0=(0, 0)))
    rates.update(counters(IDS[1], 2.0, eth0=(100, 0)))
    rates.update(counters(IDS[1], 2.0, eth0=(100, 0)))  # not asked again since
    assert rates.rate(IDS[1], "eth0") == (100.0, 0.0)
    stale = counters(IDS[1], 2.0, eth0=(100, 0))
    stale["nodes"][0]["age_s"] = STALE_S + 1
    rates.update(stale)
    assert rates.rate(IDS[1], "eth0") is None
    rates.update(counters(IDS[0], 9.0, eth0=(0, 0)))  # the node is no longer in the answer
    assert rates.rate(IDS[1], "eth0") is None


LINKS = ["eth0", "eth1", "eth2", "eth3"]
NODE_READING = st.tuples(
    st.sampled_from([0.0, 0.4, STALE_S + 1]),  # age_s
    st.dictionaries(st.sampled_from(LINKS), st.tuples(st.integers(0, 9), st.integers(0, 9))),
)
ANSWERS = st.lists(
    st.tuples(
        st.sampled_from([0.0, 1.0, 2.0, STALE_S]),  # the viewer's clock moves on by
        st.dictionaries(st.sampled_from(IDS[:3]), NODE_READING),
    ),
    min_size=1,
    max_size=12,
)


def answer_of(now: float, nodes: dict[str, tuple[float, dict[str, tuple[int, int]]]]) -> Any:
    """A `counters` answer at `now` on the viewer's clock: each node's reading, made on its
    own clock (a node's clock is the viewer's plus an offset of its own)."""
    listed = []
    for node_id, (age, links) in nodes.items():
        at = now - age + 1000 * IDS.index(node_id)
        reading = counters(node_id, at, **links)["nodes"][0]
        listed.append(reading | {"age_s": age})
    return {"at": now, "nodes": listed}


@given(ANSWERS)
def test_the_model_holds_what_the_last_answers_hold(
    steps: list[tuple[float, dict[str, tuple[float, dict[str, tuple[int, int]]]]]],
) -> None:
    """After each answer the model holds the links it named and, of each node it left out,
    the links of that node's last reading while it is not stale; a link held all along has
    the rate it has when read alone."""
    rates = Rates()
    now = 0.0
    seen: list[tuple[float, dict[str, tuple[float, dict[str, tuple[int, int]]]]]] = []
    for step_s, nodes in steps:
        now += step_s
        seen.append((now, nodes))
        rates.update(answer_of(now, nodes))
        held = rates.remembered()
        for node_id, interface in held:
            then, (age, links) = next((t, n[node_id]) for t, n in seen[::-1] if node_id in n)
            assert interface in links  # named by the last answer that held its node
            assert node_id in nodes or now - (then - age) <= STALE_S  # this one, or not stale
        for node_id, (_, links) in nodes.items():
            for interface in links:
                pair = (node_id, interface)
                assert pair in held
                runs = [n[node_id][1] if node_id in n else {} for _, n in seen]
                first = next(i for i, links in enumerate(runs) if interface in links)
                if all(interface in links for links in runs[first:]):
                    alone = Rates()
                    for at, n in seen[first:]:
                        age, links = n[node_id]
                        alone.update(answer_of(at, {node_id: (age, {interface: links[interface]})}))
                    assert rates.rate(*pair) == alone.rate(*pair)


def test_a_node_naming_new_links_at_each_answer_is_held_to_its_last() -> None:
    rates = Rates()
    for second in range(60):
        links = {f"x{second}-{i}": (second, second) for i in range(140)}
        rates.update(answer_of(float(second), {IDS[1]: (0.0, links)}))
    assert rates.remembered() == {(IDS[1], f"x59-{i}") for i in range(140)}


def test_a_node_left_out_keeps_its_reading_until_it_is_stale() -> None:
    rates = Rates()
    rates.update(answer_of(10.0, {IDS[1]: (0.0, {"eth0": (0, 0)})}))
    rates.update(answer_of(12.0, {}))  # a moment without its route
    assert rates.rate(IDS[1], "eth0") is None and rates.remembered() == {(IDS[1], "eth0")}
    rates.update(answer_of(14.0, {IDS[1]: (0.0, {"eth0": (400, 800)})}))
    assert rates.rate(IDS[1], "eth0") == (100.0, 200.0)  # from its reading before it left
    rates.update(answer_of(14.0 + STALE_S + 0.1, {}))
    assert rates.remembered() == set()
    rates.update(answer_of(20.0, {IDS[1]: (0.0, {"eth0": (800, 1600)})}))
    assert rates.rate(IDS[1], "eth0") is None  # a first reading again


def test_malformed_counters_are_no_reading() -> None:
    rates = Rates()
    rates.update(counters(IDS[0], 1.0, eth0=(0, 0)))
    for bad in (-1, 2**64, True, 1.5, None, "7"):
        answer = counters(IDS[0], 2.0, eth0=(0, 0))
        answer["nodes"][0]["interfaces"][0]["rx_bytes"] = bad
        rates.update(answer)
    rates.update({"nodes": [None, {"node_id": 5}, {"node_id": IDS[0], "at": "x"}]})
    rates.update({"nodes": "x"})
    assert rates.rate(IDS[0], "eth0") is None


def step(live: Live, status: dict[str, Any], now: float) -> MeshView:
    return live.step(status, None, now)


def test_changes_joined_left_cables_and_routes() -> None:
    live = Live()
    names = ["n1", "n2", "n3", "n4"]
    first = step(live, ring_status(names, down=frozenset({IDS[2]})), 0.0)
    assert first.changes == []  # what is there at the start is no change
    seen = step(live, ring_status(names), 1.0).changes
    assert {(c.kind, c.text) for c in seen} == {
        ("joined", "n3 joined"),
        ("cable-up", "cable n2 v1n - n3 v2p came"),
        ("cable-up", "cable n3 v2n - n4 v3p came"),
    }
    moved = ring_status(names, cut=frozenset({1}))
    moved["nodes"][1].update(interface="v0p", hops=2)
    seen = step(live, moved, 2.0).changes
    assert [(c.kind, c.text) for c in seen if c.at == 2.0] == [
        ("route-moved", "route to n3 by v0p, 2 hops"),
        ("cable-down", "cable n2 v1n - n3 v2p gone"),
    ]
    assert seen[0].subject == IDS[2]
    lost = ring_status(names, cut=frozenset({1}))
    lost["nodes"][1].update(interface=None, hops=None)  # the down hold: no route, still up
    assert [c.text for c in step(live, lost, 2.5).changes if c.at == 2.5] == [
        "route to n3 lost, rerouting"
    ]
    step(live, moved, 2.6)
    gone = ring_status(names, cut=frozenset({1}))
    del gone["nodes"][0]
    gone["nodes"][0].update(interface="v0p", hops=2)  # n3's route stays where it moved
    assert [c.text for c in step(live, gone, 3.0).changes if c.at == 3.0] == [
        "n2 left",
        "cable n1 v0n - n2 v1p gone",
    ]


@given(st.lists(st.floats(0, 100), min_size=1, max_size=10), st.floats(0, 2 * HOLD))
def test_a_change_is_kept_exactly_hold_seconds(times: list[float], later: float) -> None:
    """n2 comes and goes at each of `times`, each time with its two cables: each of those
    three changes is there from its time until HOLD seconds later, not a moment more."""
    times.sort()
    now = times[-1] + later
    changes = Changes()
    names = ["n1", "n2"]
    views = [view(ring_status(names, down=frozenset({IDS[1]})), Rates(), [])]
    views.append(view(ring_status(names), Rates(), []))
    for i, at in enumerate(times):
        changes.feed(views[i % 2], views[(i + 1) % 2], at)
    expected = [at for at in times if 0 <= now - at < HOLD]
    assert [c.at for c in changes.recent(now)] == [at for at in expected[::-1] for _ in "abc"]


def test_as_json_is_plain_data() -> None:
    live = Live()
    live.step(ring_status(["n1", "n2", "n3"]), counters(IDS[0], 1.0, v0n=(0, 0)), 0.0)
    mesh = live.step(ring_status(["n1", "n2"]), counters(IDS[0], 2.0, v0n=(5, 9)), 1.0)
    data = as_json(mesh)
    assert data["me"] == IDS[0]
    assert data["nodes"][0]["state"] == "me"
    assert data["cables"][0]["a_to_b"] == 9.0
    assert data["cables"][0]["key"] == f"{IDS[0]}/v0n-{IDS[1]}/v1p"
    assert data["changes"][0]["kind"] == "left"
