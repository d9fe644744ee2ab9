"""From the mesh to a job: the cable graph, the ring, the hostfiles and the names written
into them (core/cablegraph.py, core/ring.py, core/hostfile.py, core/hostnames.py)."""

from __future__ import annotations

import itertools
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from babbler.core import hostfile, hostnames, jobenv, mlxfile
from babbler.core.cablegraph import CableGraph
from babbler.core.errors import BabblerError
from babbler.core.ring import find_ring
from babbler.ctl import hostfile as jobfiles
from tests import needs
from tests.unit.samples import typed


def ident(i: int) -> str:
    return f"{i + 1:012x}"


def mesh_status(
    n: int,
    cables: list[tuple[int, int]],
    me: int = 0,
    names: dict[int, str | None] | None = None,
    no_v4: tuple[int, ...] = (),
    unreachable: tuple[int, ...] = (),
) -> dict[str, Any]:
    """Node `me`'s status in a mesh of n nodes joined by `cables` (pairs; repeat a pair for
    parallel cables). Cable k has the /31 10.77.128+k//128.(2k%256); node i is n{i+1}."""
    default: dict[int, str | None] = {i: f"n{i + 1}" for i in range(n)}
    names = default | (names or {})
    ends: dict[int, list[dict[str, str]]] = {i: [] for i in range(n)}
    for k, (a, b) in enumerate(cables):
        base = f"10.77.{128 + k // 128}.{(2 * k) % 256}"
        low, high = base, base.rsplit(".", 1)[0] + f".{(2 * k) % 256 + 1}"
        ends[a].append({"interface": f"c{k}", "address": low, "peer": high})
        ends[b].append({"interface": f"c{k}", "address": high, "peer": low})

    def v4(i: int) -> str | None:
        return None if i in no_v4 else f"10.77.0.{i + 1}"

    return {
        "node_id": ident(me),
        "name": names[me],
        "node_address": f"fde0:20c6:1fa7:ffff:{me + 1:x}::",
        "node_address_v4": v4(me),
        "addresses_v4": ends[me],
        "interfaces": [{"name": c["interface"], "cost": 32} for c in ends[me]],
        "nodes": [
            {
                "node_id": ident(i),
                "name": names[i],
                "version": "0.1.0",
                "node_address": f"fde0:20c6:1fa7:ffff:{i + 1:x}::",
                "node_address_v4": v4(i),
                "reachable": i not in unreachable,
                "cables": ends[i],
                "links": [{"name": c["interface"], "cost": 32} for c in ends[i]],
            }
            for i in range(n)
            if i != me
        ],
    }


def ring_cables(n: int) -> list[tuple[int, int]]:
    return [(i, (i + 1) % n) for i in range(n)]


def graph(*args: Any, **kwargs: Any) -> CableGraph:
    return CableGraph.from_status(mesh_status(*args, **kwargs))


# The cable graph


def test_cables_are_two_ends_that_name_each_other() -> None:
    g = graph(3, [(0, 1), (1, 2), (1, 2)])
    assert len(g.between(ident(0), ident(1))) == 1
    assert len(g.between(ident(1), ident(2))) == 2  # parallel cables
    assert g.between(ident(0), ident(2)) == []
    cable = g.between(ident(1), ident(0))[0]
    assert (cable.near.node_id, cable.far.node_id) == (ident(0), ident(1))
    assert str(cable.end_on(ident(1)).address) == "10.77.128.1"


def test_an_end_whose_far_end_says_nothing_is_no_cable() -> None:
    status = mesh_status(2, [(0, 1)])
    status["nodes"][0]["cables"] = []  # its info is older than the cable
    assert CableGraph.from_status(status).between(ident(0), ident(1)) == []


def test_the_best_cable_comes_first() -> None:
    status = mesh_status(2, [(0, 1), (0, 1)])
    status["interfaces"][0]["cost"] = 96  # c0 is slow at this end: c1 first
    cables = CableGraph.from_status(status).between(ident(0), ident(1))
    assert [c.near.interface for c in cables] == ["c1", "c0"]


@pytest.mark.parametrize(
    "bad",
    [
        "not a list",
        [1, None, "x"],
        [{"interface": "c9", "address": "10.77.200.1", "peer": "nonsense"}],
        [{"interface": "a b", "address": "10.77.128.1", "peer": "10.77.128.0"}],
        [{"interface": "x" * 16, "address": "10.77.128.1", "peer": "10.77.128.0"}],
        [{"address": "10.77.128.1", "peer": "10.77.128.0"}],
    ],
)
def test_a_far_node_saying_nonsense_gives_no_cable_and_no_crash(bad: Any) -> None:
    status = mesh_status(2, [(0, 1)])
    status["nodes"][0]["cables"] = bad
    assert CableGraph.from_status(status).between(ident(0), ident(1)) == []


def test_a_hostile_ipv4_node_address_is_not_taken() -> None:
    status = mesh_status(2, [(0, 1)])
    status["nodes"][0]["node_address_v4"] = "10.77.0.2 evil\n1.2.3.4"
    assert CableGraph.from_status(status).hosts[ident(1)].node_address_v4 is None


# The ring


def brute_force(width: list[list[int]]) -> tuple[list[int], int] | None:
    """Every order from node 0: the widest ring, first in lexicographic order."""
    n = len(width)
    best: tuple[int, list[int]] | None = None
    for rest in itertools.permutations(range(1, n)):
        order = [0, *rest]
        least = min(width[order[i]][order[(i + 1) % n]] for i in range(n))
        if least and (best is None or least > best[0]):
            best = (least, order)
    return None if best is None else (best[1], best[0])


@st.composite
def widths(draw: st.DrawFn) -> list[list[int]]:
    n = draw(st.integers(2, 7))
    w = [[0] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1, n):
            w[i][j] = w[j][i] = draw(st.sampled_from([0, 0, 1, 1, 2, 3]))
    return w


@settings(max_examples=300, deadline=None)
@given(widths())
def test_the_ring_is_the_widest_and_first_as_brute_force_finds(w: list[list[int]]) -> None:
    assert find_ring(w) == brute_force(w)


def test_a_ring_of_16_is_found_exactly_and_fast_enough() -> None:
    n = 16
    # two 8-rings joined at one node pair: every node has two cables, yet no ring
    w = [[0] * n for _ in range(n)]
    for base in (0, 8):
        for k in range(8):
            i, j = base + k, base + (k + 1) % 8
            w[i][j] = w[j][i] = 1
    w[0][8] = w[8][0] = 1
    assert find_ring(w) is None
    w[7][15] = w[15][7] = 1  # a second bridge: now a ring exists
    found = find_ring(w)
    assert found is not None and sorted(found[0]) == list(range(n))
    bipartite = [[1 if (i < 7) != (j < 7) else 0 for j in range(n)] for i in range(n)]
    assert find_ring(bipartite) is None  # 7 against 9 can never alternate


def test_beyond_16_nodes_a_large_ring_is_still_found() -> None:
    n = 40
    w = [[1 if abs(i - j) in (1, n - 1) else 0 for j in range(n)] for i in range(n)]
    assert find_ring(w) == (list(range(n)), 1)


# MLX's ring hostfile


def test_mlx_four_ring_each_host_lists_its_cable_to_the_previous() -> None:
    made = mlxfile.mlx(graph(4, ring_cables(4)), None, False, False)
    assert made.warnings == []
    # ring n1 n2 n3 n4; cable k joins k and k+1; n1's previous is n4 (cable 3)
    assert made.value == [
        {"ssh": "10.77.0.1", "ips": ["10.77.128.7"]},
        {"ssh": "10.77.0.2", "ips": ["10.77.128.1"]},
        {"ssh": "10.77.0.3", "ips": ["10.77.128.3"]},
        {"ssh": "10.77.0.4", "ips": ["10.77.128.5"]},
    ]


def test_mlx_two_nodes_with_two_cables_use_both() -> None:
    made = mlxfile.mlx(graph(2, [(0, 1), (0, 1)]), None, False, False)
    assert made.value == [
        {"ssh": "10.77.0.1", "ips": ["10.77.128.0", "10.77.128.2"]},
        {"ssh": "10.77.0.2", "ips": ["10.77.128.1", "10.77.128.3"]},
    ]


def test_mlx_every_host_lists_as_many_ips_as_the_narrowest_step() -> None:
    cables = [*ring_cables(3), (0, 1), (1, 2)]  # n3-n1 has one cable
    made = mlxfile.mlx(graph(3, cables), None, False, False)
    assert [len(h["ips"]) for h in made.value] == [1, 1, 1]


def test_mlx_is_the_same_file_on_every_node() -> None:
    cables = [(0, 2), (2, 1), (1, 3), (3, 0), (0, 1), (0, 1)]
    files = {json.dumps(mlxfile.mlx(graph(4, cables, me=me), None, False, False).value)
             for me in range(4)}  # fmt: skip
    assert len(files) == 1


def test_mlx_nodes_selects_but_does_not_order() -> None:
    g = graph(4, [*ring_cables(4), (0, 2)])
    made = mlxfile.mlx(g, [ident(2), ident(0)], False, False)
    assert [h["ssh"] for h in made.value] == ["10.77.0.1", "10.77.0.3"]


def test_mlx_ssh_names_are_the_hosts_names() -> None:
    g = graph(2, [(0, 1)], names={1: "bad name#1"})
    made = mlxfile.mlx(g, None, False, True)
    assert [h["ssh"] for h in made.value] == ["n1", f"node-{ident(1)}"]


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (mesh_status(1, []), "a job needs two nodes or more; only n1"),
        (mesh_status(2, []), "no ring through the cables; not cabled: n1-n2"),
        (mesh_status(4, [(0, 1), (1, 2), (2, 3)]), "n1 has a cable to n2 only; n4 has a"),
        (mesh_status(4, [(0, 1), (1, 2), (2, 0)]), "n4 has no cable to the others"),
        (mesh_status(3, ring_cables(3), no_v4=(2,)), "n3 has no IPv4 node address"),
        (mesh_status(3, ring_cables(3), names={2: None}), "has not answered for its node info"),
        (mesh_status(3, ring_cables(3), no_v4=(0,)), "this node has no IPv4 node address"),
    ],
)
def test_mlx_refusals_name_what_is_missing(status: dict[str, Any], expected: str) -> None:
    with pytest.raises(BabblerError, match=expected.replace("(", r"\(")):
        mlxfile.mlx(CableGraph.from_status(status), None, False, False)


def test_mlx_named_unreachable_node_is_refused_by_its_cables_first() -> None:
    g = graph(3, ring_cables(3), unreachable=(2,))
    with pytest.raises(BabblerError) as refused:
        mlxfile.mlx(g, [ident(0), ident(2)], False, False)
    assert str(refused.value) == (
        "no ring through the cables; not cabled: n1-n3 (n3 not reachable now);"
        " --allow-hops uses node addresses instead"
    )
    with pytest.raises(BabblerError, match="n3 is not reachable now"):  # hops cannot help
        mlxfile.mlx(g, [ident(0), ident(2)], True, False)
    made = mlxfile.mlx(g, None, False, False)
    assert len(made.value) == 2 and "left out" in made.warnings[0] and "n3" in made.warnings[0]


def test_mlx_a_cut_off_node_refuses_with_the_ring_first() -> None:
    """Issue 32's five-ring with n3 cut off: the cause (no ring) first, then who was left out;
    torch, which needs no cables, says n3 is not reachable."""
    g = graph(5, ring_cables(5), unreachable=(2,))
    with pytest.raises(BabblerError) as refused:
        mlxfile.mlx(g, None, False, False)
    assert str(refused.value) == (
        "no ring through the cables: n2 has a cable to n1 only; n4 has a cable to n5 only;"
        " --allow-hops uses node addresses instead (left out, not reachable: n3)"
    )
    with pytest.raises(BabblerError) as named:
        mlxfile.mlx(g, [ident(i) for i in range(5)], False, False)
    assert str(named.value).startswith(
        "no ring through the cables: n2 has a cable to n1 only; n3 has no cable to the others"
        " (not reachable now); n4 has a cable to n5 only"
    )
    with pytest.raises(BabblerError, match=r"^n3 is not reachable now"):
        hostfile.torch(g, [ident(i) for i in range(5)], 29500, False)


def test_mlx_allow_hops_goes_over_node_addresses_with_a_warning() -> None:
    made = mlxfile.mlx(graph(3, [(0, 1), (1, 2)]), None, True, False)
    assert [h["ips"] for h in made.value] == [["10.77.0.1"], ["10.77.0.2"], ["10.77.0.3"]]
    assert "node addresses" in made.warnings[0]


# jaccl, torch, hosts


def full_mesh(n: int) -> list[tuple[int, int]]:
    return [(i, j) for i in range(n) for j in range(i + 1, n)]


def test_jaccl_matrix_names_the_interface_facing_each_host() -> None:
    made = mlxfile.jaccl(graph(3, full_mesh(3)), None, False)
    hosts = made.value["hosts"]
    assert made.value["backend"] == "jaccl"
    assert [h["rdma"] for h in hosts] == [
        [None, "rdma_c0", "rdma_c1"],
        ["rdma_c0", None, "rdma_c2"],
        ["rdma_c1", "rdma_c2", None],
    ]
    assert [h["ips"] for h in hosts] == [["10.77.0.1"], ["10.77.0.2"], ["10.77.0.3"]]


def test_jaccl_refuses_without_a_full_mesh() -> None:
    with pytest.raises(BabblerError, match="not cabled: n1-n3"):
        mlxfile.jaccl(graph(3, [(0, 1), (1, 2)]), None, False)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # MLX's open()
def test_jaccl_file_is_read_by_mlx_own_hostfile_class(tmp_path: Path) -> None:
    needs.mlx()
    from mlx._distributed_utils import common

    made = mlxfile.jaccl(graph(3, full_mesh(3)), None, False)
    path = tmp_path / "jaccl.json"
    path.write_text(json.dumps(made.value))
    parsed = common.Hostfile.from_file(path)  # type: ignore[no-untyped-call]
    assert parsed.backend == "jaccl"
    hosts = parsed.hosts
    # launch_jaccl's own checks: a full matrix, null on the diagonal, a coordinator ip
    assert all(len(h.rdma) == len(hosts) for h in hosts)
    assert all(h.rdma[i] is None for i, h in enumerate(hosts))
    assert hosts[0].ips == ["10.77.0.1"]
    # the matrix is symmetric in cables: i's device towards j is on the cable j uses to i
    assert hosts[0].rdma[1] == hosts[1].rdma[0] == "rdma_c0"


def test_torch_lines() -> None:
    g = graph(3, ring_cables(3), me=1)
    made = hostfile.torch(g, None, 29500, True)
    assert made.value == [
        "MASTER_ADDR=10.77.0.1",
        "MASTER_PORT=29500",
        "WORLD_SIZE=3",
        "# rank 0: n1 10.77.0.1",
        "# rank 1: n2 10.77.0.2",
        "# rank 2: n3 10.77.0.3",
        "NODE_RANK=1",
    ]
    with pytest.raises(BabblerError, match="this node is not one of --nodes"):
        hostfile.torch(g, [ident(0), ident(2)], 29500, True)


def test_hosts_lines_never_shadow_this_host_or_take_hostile_names() -> None:
    names: dict[int, str | None] = {
        1: "localhost", 2: "my box", 3: "a#b", 4: "x" * 64, 5: "N1", 6: None, 7: "twin",
        8: "twin", 9: "good", 10: f"node-{ident(9)}",
    }  # fmt: skip
    status = mesh_status(11, [], names=names)
    status["nodes"][5]["version"] = None  # node 7 never answered
    made = hostfile.hosts_lines(CableGraph.from_status(status), taken=["n1"])
    lines = [line.split("\t") for line in made.value[1:]]
    written = [name for _, name in lines]
    # IPv6 for every node, IPv4 for those that said one (not the one that never answered)
    assert len(lines) == 11 + 10
    assert all(hostnames.valid_host_name(name) for name in written)
    assert "good" in written  # the one valid, unshared name
    assert set(written) == {"good", *(f"node-{ident(i)}" for i in range(11) if i != 9)}


@given(st.lists(st.one_of(st.none(), st.text(max_size=70)), min_size=1, max_size=8))
def test_written_names_are_always_valid_and_unique(given_names: list[str | None]) -> None:
    pairs = [(ident(i), name) for i, name in enumerate(given_names)]
    out = hostnames.names(pairs, taken=["myhost"])
    assert all(hostnames.valid_host_name(name) for name in out.values())
    assert len({name.lower() for name in out.values()}) == len(out)
    assert "myhost" not in out.values()


@pytest.mark.parametrize(
    ("name", "valid"),
    [
        ("n1", True), ("mac-studio.local", True), ("a" * 63, True), ("a" * 64, False),
        ("-a", False), ("a-", False), ("a b", False), ("a#b", False), ("", False),
        ("10.77.0.1", False), ("é", False), ("a..b", False),
    ],
)  # fmt: skip
def test_valid_host_names(name: str, valid: bool) -> None:
    assert hostnames.valid_host_name(name) is valid


# Every MLX hostfile, as mlx.launch reads and checks it


# MLX's Hostfile.from_file leaves its file open: the warning comes when it is collected
MLX_OPENS = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


def mlx_launch(
    value: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Any, list[tuple[Any, ...]]]:
    """`mlx.launch --hostfile FILE job.py` with `value` in FILE: the pinned MLX's own
    launch.main, which parses the file (common.Hostfile.from_file), takes its backend (else
    its default) and runs launch_ring or launch_jaccl with every check they make; only
    starting the ranks is replaced. Returns the parsed file and each rank's (rank, ssh,
    python, cwd, files, env, command). A refusal is argparse's: SystemExit, said on stderr."""
    needs.mlx()
    from mlx._distributed_utils import common, launch

    path = tmp_path / "hosts.json"
    path.write_text(json.dumps(value))
    ranks: list[tuple[Any, ...]] = []
    monkeypatch.setattr(launch, "_launch_with_io", lambda _, each, __: ranks.extend(each))
    monkeypatch.setattr(sys, "argv", ["mlx.launch", "--hostfile", str(path), "job.py"])
    launch.main()  # type: ignore[no-untyped-call]
    parsed = common.Hostfile.from_file(path)  # type: ignore[no-untyped-call]
    return parsed, [args for args, _ in ranks]


def ready_status(*args: Any, ready: dict[int, bool | None] | None = None, **kwargs: Any) -> Any:
    """mesh_status with each node's RDMA readiness (default: every node ready)."""
    status = mesh_status(*args, **kwargs)
    ready = ready or {}

    def rdma(i: int) -> dict[str, Any] | None:
        said = ready.get(i, True)
        return None if said is None else {"ready": said}

    status["rdma"] = rdma(kwargs.get("me", 0))
    for node in status["nodes"]:
        node["rdma"] = rdma(int(node["node_id"], 16) - 1)
    return CableGraph.from_status(status)


@MLX_OPENS
@pytest.mark.parametrize(
    ("backend", "n", "cables", "written"),
    [
        (None, 4, ring_cables(4), ""),  # the bare list: launch's default backend, ring
        ("ring", 4, ring_cables(4), "ring"),
        ("jaccl", 3, full_mesh(3), "jaccl"),
        ("jaccl-ring", 4, ring_cables(4), "jaccl-ring"),
        ("jaccl-ring", 4, ring_cables(4) * 2, "jaccl-ring"),  # two cables every step: lists
        ("auto", 3, full_mesh(3), "jaccl"),
        ("auto", 4, ring_cables(4), "jaccl-ring"),
    ],
)
def test_every_mlx_backend_is_read_and_checked_by_mlx_launch(
    backend: str | None,
    n: int,
    cables: list[tuple[int, int]],
    written: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made = mlxfile.by_backend(backend, ready_status(n, cables), None, False, False)
    parsed, ranks = mlx_launch(made.value, tmp_path, monkeypatch)
    assert parsed.backend == written and len(ranks) == n
    env = ranks[0][5]
    if written.startswith("jaccl"):
        # the coordinator is the first host's node address, as before
        assert "MLX_JACCL_COORDINATOR=10.77.0.1:32323" in env
        assert ("MLX_JACCL_RING=1" in env) is (written == "jaccl-ring")
        devices = json.loads(ranks[0][4]["MLX_IBV_DEVICES"])
        assert devices == [h["rdma"] for h in made.value["hosts"]]
    else:
        ring = json.loads(ranks[0][4]["MLX_HOSTFILE"])  # what each rank reads
        cable_addresses = {c for h in (made.value if not written else made.value["hosts"])
                           for c in h["ips"]}  # fmt: skip
        assert len(ring) == n and all(
            ip.rsplit(":", 1)[0] in cable_addresses for node in ring for ip in node
        )


@MLX_OPENS
def test_mlx_launch_checks_catch_a_broken_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The harness above refuses what mlx.launch refuses: a neighbour without a device."""
    made = mlxfile.jaccl_ring(graph(4, ring_cables(4)), None, False)
    made.value["hosts"][0]["rdma"][1] = None
    with pytest.raises(SystemExit):
        mlx_launch(made.value, tmp_path, monkeypatch)
    assert "no RDMA device is listed" in capsys.readouterr().err


def test_jaccl_ring_names_the_neighbours_devices_in_ring_order() -> None:
    # ring n1 n3 n2 n4 (n1-n2 not cabled); n1-n3 has two cables, every other step one
    g = graph(4, [(0, 2), (2, 1), (1, 3), (3, 0), (0, 2)])
    made = mlxfile.jaccl_ring(g, None, False)
    hosts = made.value["hosts"]
    assert made.value["backend"] == "jaccl-ring" and made.value["envs"] == []
    assert [h["ssh"] for h in hosts] == ["10.77.0.1", "10.77.0.3", "10.77.0.2", "10.77.0.4"]
    assert [h["ips"] for h in hosts] == [[h["ssh"]] for h in hosts]
    assert [h["rdma"] for h in hosts] == [
        [None, "rdma_c0", None, "rdma_c3"],
        ["rdma_c0", None, "rdma_c1", None],
        [None, "rdma_c1", None, "rdma_c2"],
        ["rdma_c3", None, "rdma_c2", None],
    ]
    # two cables at every step: each neighbour's entry is a list, one device per cable
    doubled = mlxfile.jaccl_ring(graph(3, ring_cables(3) * 2), None, False).value["hosts"]
    assert doubled[0]["rdma"] == [None, ["rdma_c0", "rdma_c3"], ["rdma_c2", "rdma_c5"]]


def test_mlx_without_backend_keeps_the_bare_list_and_jaccl_equals_backend_jaccl() -> None:
    g = graph(3, full_mesh(3))
    assert isinstance(mlxfile.by_backend(None, g, None, False, False).value, list)
    assert mlxfile.jaccl(g, None, False) == mlxfile.by_backend("jaccl", g, None, False, False)
    ring = mlxfile.by_backend("ring", g, None, False, False).value
    assert ring == {
        "backend": "ring",
        "envs": [],
        "hosts": mlxfile.mlx(g, None, False, False).value,
    }


@pytest.mark.parametrize(
    ("ready", "n", "cables", "backend", "why"),
    [
        ({}, 3, full_mesh(3), "jaccl", "every host is ready for RDMA and cabled to every other"),
        ({}, 4, ring_cables(4), "jaccl-ring", "a ring but not a full mesh (not cabled: n1-n3"),
        ({1: False}, 3, full_mesh(3), "ring", "not ready for RDMA: n2"),
        ({2: None}, 3, full_mesh(3), "ring", "RDMA readiness unknown (not a Mac, or not read"),
        ({0: False, 1: None}, 3, full_mesh(3), "ring", "not ready for RDMA: n1; RDMA readiness"),
    ],
)
def test_auto_chooses_as_distributed_config_and_says_why(
    ready: dict[int, bool | None], n: int, cables: list[tuple[int, int]], backend: str, why: str
) -> None:
    made = mlxfile.auto(ready_status(n, cables, ready=ready), None, False, False)
    assert made.value["backend"] == backend
    (note,) = made.notes
    assert note.startswith(f"backend {backend}: ") and why in note, note


def test_auto_ready_without_a_ring_refuses_as_ring_does() -> None:
    with pytest.raises(BabblerError, match=r"^no ring through the cables: n1 has a cable to n2"):
        mlxfile.auto(ready_status(3, [(0, 1), (1, 2)]), None, False, False)
    made = mlxfile.auto(ready_status(3, [(0, 1), (1, 2)]), None, True, False)
    assert made.value["backend"] == "ring" and "no ring" in made.notes[0]


def test_jaccl_backends_warn_of_a_node_not_ready_or_not_known_to_be() -> None:
    made = mlxfile.jaccl(ready_status(3, full_mesh(3), ready={2: False}), None, False)
    assert made.warnings == ["not ready for RDMA: n3 (babblerctl doctor says what to run there)"]
    unknown = (
        "RDMA readiness unknown (not a Mac, or not read yet): n1, n2, n3"
        " (jaccl runs only between Macs ready for RDMA)"
    )
    assert mlxfile.jaccl(graph(3, full_mesh(3)), None, False).warnings == [unknown]
    assert mlxfile.jaccl_ring(graph(3, full_mesh(3)), None, False).warnings == [unknown]


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (mesh_status(4, [(0, 1), (1, 2), (2, 3)]),
         "no ring through the cables: n1 has a cable to n2 only; n4 has a cable to n3 only;"
         " jaccl-ring needs one (no hops over RDMA)"),
        (mesh_status(1, []), "a job needs two nodes or more; only n1 (babblerctl nodes)"),
        (mesh_status(3, ring_cables(3), no_v4=(1,)),
         "n2 has no IPv4 node address (IPv4 off or refused there: babblerctl status)"),
    ],
)  # fmt: skip
def test_jaccl_ring_refusals(status: dict[str, Any], expected: str) -> None:
    with pytest.raises(BabblerError) as refused:
        mlxfile.jaccl_ring(CableGraph.from_status(status), None, False)
    assert str(refused.value) == expected


# The variables other frameworks read; llama.cpp's --rpc


def test_env_for_this_node_is_what_export_and_env_take() -> None:
    made = jobenv.env(graph(3, ring_cables(3), me=1), None, 29500, "lo:babbler")
    assert made.value == [
        "MASTER_ADDR=10.77.0.1",
        "MASTER_PORT=29500",
        "WORLD_SIZE=3",
        "NODE_RANK=1",
        "GLOO_SOCKET_IFNAME=lo:babbler",
        "TP_SOCKET_IFNAME=lo:babbler",
        "VLLM_HOST_IP=10.77.0.2",
    ]
    assert made.notes == [jobenv.NO_NCCL]
    text = "\n".join(made.value)
    # as torch, gloo, TensorPipe and vLLM read them: from the process's environment
    show = [sys.executable, "-c", "import json, os; print(json.dumps(dict(os.environ)))"]
    expected = dict(line.split("=", 1) for line in made.value)
    for shell in (f"env $(cat) {shlex.join(show)}", f"export $(cat); {shlex.join(show)}",
                  f'set -a; eval "$(cat)"; {shlex.join(show)}'):  # fmt: skip
        done = subprocess.run(
            ["bash", "-c", shell], input=text, capture_output=True, text=True, env={}, check=True
        )
        seen = json.loads(done.stdout)
        assert {k: seen.get(k) for k in expected} == expected, shell


# What getifaddrs(3) gives on a Linux node (glibc names an IPv4 address by its label): the
# order NCCL and libuv walk.
IFADDRS = [
    ("lo", "127.0.0.1"),
    ("lo:babbler", "10.77.0.2"),
    ("eth0", "192.168.1.20"),
    ("lo", "::1"),
    ("lo", "fde0:20c6:1fa7:ffff:2::"),
]


def nccl_list(value: str) -> list[tuple[str, int]]:
    """NCCL's parseStringList (nccl src/misc/utils.cc): names split on ',', a name ends at
    its first ':' and atoi() of what follows is its port (the rest up to ',' skipped)."""
    out = []
    for item in value.split(","):
        name, colon, rest = item.partition(":")
        if name:
            digits = re.match(r"\s*[+-]?\d+", rest)
            out.append((name, (int(digits.group()) if digits else 0) if colon else -1))
    return out


def nccl_interface(value: str) -> str | None:
    """The address NCCL's bootstrap binds for NCCL_SOCKET_IFNAME=value: findInterfaces
    (nccl src/misc/socket.cc) strips a leading '^' (not) then '=' (exact), parses the list,
    skips IPv6 loopback, and keeps the first entry whose name matchIfList accepts (matchIf:
    exact is strcmp, else the name starts with the prefix; matchPort(-1, any) is true)."""
    exclude = value.startswith("^")
    value = value[1:] if exclude else value
    exact = value.startswith("=")
    wanted = nccl_list(value[1:] if exact else value)
    for name, address in IFADDRS:
        if address == "::1":
            continue
        hit = not wanted or any(
            (name == prefix if exact else name.startswith(prefix)) for prefix, _ in wanted
        )
        if hit != exclude:
            return address
    return None


def tensorpipe_interface(value: str) -> str | None:
    """TensorPipe's TP_SOCKET_IFNAME (torch/csrc/distributed/rpc/tensorpipe_agent.cpp
    guessUvAddress -> tensorpipe/transport/uv/utility.cc lookupAddrForIface): the first of
    libuv's uv_interface_addresses (getifaddrs' names) whose name equals the value exactly."""
    return next((address for name, address in IFADDRS if name == value), None)


def vllm_host_ip(environ: dict[str, str]) -> str | None:
    """vLLM's get_ip (vllm/utils network_utils.py; envs.py reads os.getenv("VLLM_HOST_IP",
    "")): the value as it is, unchecked, when not empty; empty or unset means "guess"."""
    return environ.get("VLLM_HOST_IP", "") or None


def test_every_interface_variable_names_the_node_address_as_its_framework_reads_it() -> None:
    made = jobenv.env(graph(3, ring_cables(3), me=1), None, 29500, "lo:babbler")
    environ = dict(line.split("=", 1) for line in made.value)
    assert tensorpipe_interface(environ["TP_SOCKET_IFNAME"]) == "10.77.0.2"
    assert vllm_host_ip(environ) == "10.77.0.2"
    if "NCCL_SOCKET_IFNAME" in environ:
        assert nccl_interface(environ["NCCL_SOCKET_IFNAME"]) == "10.77.0.2"
    # and no NCCL value names the label: exact or prefix, the ':' ends the name
    assert nccl_list("=lo:babbler"[1:]) == [("lo", 0)]
    for value in ("=lo:babbler", "lo:babbler", "lo", "=lo"):
        assert nccl_interface(value) == "127.0.0.1", value
    assert nccl_interface("^lo") == "192.168.1.20"
    assert nccl_interface("=eth0:7,lo") == "127.0.0.1"  # the reader is no pushover
    assert tensorpipe_interface("lo") == "127.0.0.1" and tensorpipe_interface("lo:b") is None
    assert vllm_host_ip({"VLLM_HOST_IP": ""}) is None


def test_env_on_macos_leaves_out_the_interface_names_and_says_why() -> None:
    made = jobenv.env(graph(2, [(0, 1)]), None, 29600, None)
    assert made.value == [
        "MASTER_ADDR=10.77.0.1", "MASTER_PORT=29600", "WORLD_SIZE=2", "NODE_RANK=0",
        "VLLM_HOST_IP=10.77.0.1",
    ]  # fmt: skip
    assert made.notes == [jobenv.NO_LABEL, jobenv.NO_NCCL]
    assert all("docs/jobs.md" in note for note in made.notes)


def test_env_refuses_when_this_node_is_not_chosen() -> None:
    with pytest.raises(BabblerError, match="this node is not one of --nodes"):
        jobenv.env(graph(3, ring_cables(3)), [ident(1), ident(2)], 29500, "lo:babbler")


def llama_rpc_servers(servers: str) -> list[tuple[str, int]]:
    """llama.cpp's own reading of `--rpc`: common/arg.cpp add_rpc_devices splits on ',' with
    string_split<std::string> (common/common.h: every piece, empty ones too), then each
    endpoint goes to ggml-rpc.cpp parse_endpoint: host up to the first ':', std::stoi of
    the rest (which fails on no digits)."""
    out = []
    for endpoint in servers.split(","):
        pos = endpoint.find(":")
        if pos < 0:
            raise ValueError(f"no ':' in {endpoint!r}")
        digits = re.match(r"\s*[+-]?\d+", endpoint[pos + 1 :])
        if digits is None:
            raise ValueError(f"std::stoi fails on {endpoint[pos + 1 :]!r}")
        out.append((endpoint[:pos], int(digits.group())))
    return out


def test_llama_rpc_lists_every_other_node_as_llama_cpp_reads_it() -> None:
    made = jobenv.llama_rpc(graph(3, ring_cables(3), me=1), None, jobenv.LLAMA_RPC_PORT)
    (line,) = made.value
    assert llama_rpc_servers(line) == [("10.77.0.1", 50052), ("10.77.0.3", 50052)]
    assert "rpc-server --host" in made.notes[0]
    with pytest.raises(ValueError):  # the reader is no pushover
        llama_rpc_servers("10.77.0.1:50052,")


# babblerctl hostfile's own part (ctl/hostfile.py)


def built(status: dict[str, Any], form: str, **given: Any) -> jobfiles.Written:
    options: dict[str, Any] = {"chosen": None, "backend": None, "allow_hops": False,
                               "ssh_names": False, "port": None, "this": False} | given  # fmt: skip
    return jobfiles.build(typed(status), form, taken=[], **options)


def test_hosts_nodes_prints_only_those_nodes() -> None:
    status = mesh_status(3, ring_cables(3))
    lines = built(status, "hosts", chosen="n2,n1").text.splitlines()[1:]
    assert [line.split("\t") for line in lines] == [
        ["10.77.0.1", "n1"], ["fde0:20c6:1fa7:ffff:1::", "n1"],
        ["10.77.0.2", "n2"], ["fde0:20c6:1fa7:ffff:2::", "n2"],
    ]  # fmt: skip
    assert len(built(status, "hosts").text.splitlines()) == 1 + 6


def test_backend_is_for_mlx_only_and_auto_says_why_on_stderr() -> None:
    status = mesh_status(3, full_mesh(3))
    with pytest.raises(BabblerError, match=r"^--backend is for --format mlx, not --format torch"):
        built(status, "torch", backend="ring")
    made = built(status, "mlx", backend="auto")
    assert json.loads(made.text)["backend"] == "ring"
    assert made.stderr == [
        "babblerctl: backend ring: RDMA readiness unknown (not a Mac, or not read yet): n1, n2, n3"
    ]


def test_env_and_llama_rpc_ports_and_the_platform_label() -> None:
    status = mesh_status(2, [(0, 1)]) | {"platform": "linux"}
    assert "GLOO_SOCKET_IFNAME=lo:babbler" in built(status, "env").text.splitlines()
    assert "MASTER_PORT=29500" in built(status, "env").text.splitlines()
    mac = built(status | {"platform": "macos"}, "env")
    assert "IFNAME" not in mac.text and "macOS" in mac.stderr[0]
    assert built(status, "llama-rpc").text == "10.77.0.2:50052\n"
    assert built(status, "llama-rpc", port=6000).text == "10.77.0.2:6000\n"


@pytest.mark.parametrize("port", ["0", "70000", "-1"])
def test_a_port_outside_1_to_65535_is_refused_not_taken_for_the_default(port: str) -> None:
    from click.testing import CliRunner

    from babbler.ctl.main import main

    args = ["--socket", "/nonexistent/babblerd.sock", "hostfile", "--format", "env", "--port", port]
    done = CliRunner().invoke(main, args)
    assert done.exit_code == 2 and "Invalid value for '--port'" in done.output, done.output


def test_hostfile_help_explains_every_format_in_one_line() -> None:
    from click.testing import CliRunner

    from babbler.ctl.main import main

    shown = CliRunner().invoke(main, ["hostfile", "--help"], terminal_width=200).output
    lines = shown.splitlines()
    for name, line in jobfiles.FORMATS.items():
        assert f"  {name:<10} {line}" in lines, name
