"""Who this node is (daemon/identity.py, daemon/routerids.py): router ids fresh per babeld
and kept as ours, echoes never a collision, a lasting foreign announcement is (also under
an id a cloned disk brought), a re-roll persists and re-rolls are capped; a state dir that
cannot be written changes nothing but persistence."""

from __future__ import annotations

import stat
from pathlib import Path

import structlog

from babbler.core.addressing import format_node_id, node_range
from babbler.core.babeld_lines import TableLine, parse_line
from babbler.core.collision import MAX_REROLLS, MIN_ECHO, REROLL_WINDOW
from babbler.core.table import Applied, MeshTable
from babbler.daemon import routerids
from babbler.daemon.identity import Identity
from babbler.daemon.nodeid import NodeId

NODE = 0x1A2B3C4D5E6F
HELLO = 0.1  # hold time: 5 s (collision.hold_time)


def applied(
    verb: str, router_id: str, table: MeshTable, prefix_n: int = 1, node: int = NODE
) -> Applied:
    prefix = f"{node_range(node).network_address + prefix_n}/128"
    line = parse_line(
        f"{verb} route r{prefix_n} prefix {prefix} from ::/0 installed yes id {router_id} "
        "metric 96 refmetric 0 via fe80::1 if v1x2"
    )
    assert isinstance(line, TableLine)
    result = table.apply(line)
    assert result is not None
    return result


def test_router_ids_are_locally_administered_unicast_and_fresh() -> None:
    ids = {routerids.random_router_id() for _ in range(100)}
    assert len(ids) == 100
    for rid in ids:
        first = int(rid.split(":")[0], 16)
        assert len(rid) == 23 and rid.count(":") == 7
        assert first & 0x02 and not first & 0x01


def test_the_last_sixteen_router_ids_are_kept_and_garbage_is_ignored(tmp_path: Path) -> None:
    taken = [routerids.take(tmp_path) for _ in range(20)]
    assert routerids.read_router_ids(tmp_path) == taken[-routerids.KEEP_ROUTER_IDS :]
    (tmp_path / routerids.ROUTER_IDS_FILE).write_text("nonsense\n" + taken[-1] + "\n\xff")
    assert routerids.read_router_ids(tmp_path) == []  # not ASCII: nothing trusted
    (tmp_path / routerids.ROUTER_IDS_FILE).write_text("nonsense\n" + taken[-1] + "\n")
    assert routerids.read_router_ids(tmp_path) == [taken[-1]]
    assert routerids.read_router_ids(tmp_path / "missing") == []


def test_the_next_router_id_is_known_before_babeld_starts_and_kept_as_ours(
    tmp_path: Path,
) -> None:
    identity = Identity(NodeId(NODE, "file"), tmp_path, HELLO)
    announced = identity.next_router_id
    assert identity.take_router_id() == announced
    assert identity.next_router_id != announced
    assert routerids.read_router_ids(tmp_path)[-1] == announced
    again = Identity(NodeId(NODE, "file"), tmp_path, HELLO)
    assert announced in again.used_router_ids


def test_an_echo_of_our_own_past_router_id_is_never_a_collision(tmp_path: Path) -> None:
    identity = Identity(NodeId(NODE, "file"), tmp_path, HELLO)
    old = identity.take_router_id()
    current = identity.take_router_id()
    table = MeshTable()
    identity.observe(applied("add", old, table), current, now=0.0)
    assert identity.collision_deadline(current) is None
    assert not identity.collision_due(current, now=60.0)


def test_a_lasting_foreign_announcement_is_due_after_the_hold_then_rerolled(
    tmp_path: Path,
) -> None:
    identity = Identity(NodeId(NODE, "file"), tmp_path, HELLO)
    mine = "ff:ff:ff:ff:ff:ff:ff:fe"  # larger than any other: this node is the one to move
    other = "02:00:00:00:00:00:00:0a"
    table = MeshTable()
    identity.observe(applied("add", other, table), mine, now=100.0)
    assert identity.collision_deadline(mine) == 105.0
    assert not identity.collision_due(mine, now=104.9)
    assert identity.collision_due(mine, now=105.0)
    identity.reroll()
    assert identity.node.source == "rerolled" and identity.node.value != NODE
    assert (tmp_path / "node-id").read_text().strip() == format_node_id(identity.node.value)


def test_a_clone_running_one_of_our_earlier_router_ids_is_a_collision_after_the_echoes(
    tmp_path: Path,
) -> None:
    # The disk was copied while the other machine's babeld ran with `cloned`: our history
    # holds it, but no echo of ours lives that long.
    cloned = routerids.take(tmp_path)
    identity = Identity(NodeId(NODE, "file"), tmp_path, HELLO)
    mine = identity.take_router_id()
    table = MeshTable()
    identity.observe(applied("add", cloned, table), mine, now=100.0)
    due = 100.0 + MIN_ECHO + (5.0 if mine > cloned else 10.0)
    assert identity.collision_deadline(mine) == due
    assert not identity.collision_due(mine, now=due - 0.1)
    assert identity.collision_due(mine, now=due)


def test_the_early_started_babelds_id_stays_ours_after_it_is_replaced(tmp_path: Path) -> None:
    early = routerids.take(tmp_path)  # early.py takes it before the daemon runs
    identity = Identity(NodeId(NODE, "file"), tmp_path, HELLO)
    table = MeshTable()
    elsewhere = applied("add", "02:00:00:00:00:00:00:0a", table, 9, node=0x0A0B0C0D0E0F)
    identity.observe(elsewhere, early, now=0.0)  # any route, while the early one runs
    later = identity.take_router_id()  # babeld restarted: the early id's echoes linger
    identity.observe(applied("add", early, table), later, now=1000.0)
    assert identity.collision_deadline(later) is None
    assert not identity.collision_due(later, now=5000.0)


def test_a_node_moves_three_times_in_ten_minutes_then_stays_and_says_so(tmp_path: Path) -> None:
    identity = Identity(NodeId(NODE, "file"), tmp_path, HELLO)
    mine = "ff:ff:ff:ff:ff:ff:ff:fe"
    table = MeshTable()
    moves = []
    with structlog.testing.capture_logs() as logs:
        for n in range(MAX_REROLLS + 1):
            other = f"02:00:00:00:00:00:00:{n:02x}"  # a member announcing our range again
            identity.observe(applied("add", other, table), mine, now=n * 10.0)
            if identity.collision_due(mine, now=n * 10.0 + 5.0):
                moves.append(n * 10.0 + 5.0)
        assert moves == [5.0, 15.0, 25.0]
        assert identity.collision_deadline(mine) == moves[0] + REROLL_WINDOW
        assert not identity.collision_due(mine, now=300.0)  # said once
    capped = [e for e in logs if "capped" in e["event"]]
    assert len(capped) == 1 and capped[0]["log_level"] == "error"
    assert identity.collision_due(mine, now=moves[0] + REROLL_WINDOW)


def test_a_flushed_candidate_is_forgotten(tmp_path: Path) -> None:
    identity = Identity(NodeId(NODE, "file"), tmp_path, HELLO)
    mine, other = "ff:ff:ff:ff:ff:ff:ff:fe", "02:00:00:00:00:00:00:0a"
    table = MeshTable()
    identity.observe(applied("add", other, table), mine, now=0.0)
    identity.observe(applied("flush", other, table), mine, now=1.0)
    assert identity.collision_deadline(mine) is None
    assert not identity.collision_due(mine, now=60.0)


def test_a_state_dir_that_cannot_be_written_keeps_ids_in_memory(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(stat.S_IRUSR | stat.S_IXUSR)  # read-only (root ignores it: use a file)
    blocked = tmp_path / "file-not-dir"
    blocked.write_text("")
    for where in (state, blocked):
        identity = Identity(NodeId(NODE, "file"), where, HELLO)
        first = identity.take_router_id()
        assert identity.used_router_ids[-1] == first
        identity.reroll()
        assert identity.node.source == "rerolled"
    assert identity.node.persist_error is not None  # the file-not-dir one, even as root
    assert Identity(NodeId(NODE, "file"), blocked, HELLO).used_router_ids == []
    state.chmod(stat.S_IRWXU)
