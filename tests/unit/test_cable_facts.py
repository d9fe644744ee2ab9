"""ipv4_service.moves_cables: which changes of babeld's table lead to a pass that may add
or remove a cable's /31 (lifecycle notifies `cables_changed` on them)."""

from __future__ import annotations

from ipaddress import IPv6Address

from babbler.core.babeld_lines import TableLine, parse_line
from babbler.core.table import Applied, MeshTable
from babbler.daemon.ipv4_service import cable_ends_of, moves_cables

NEIGHBOUR = "neighbour 561fe7d982e0 address fe80::e041:5dff:fecc:98a1 if v1x2"


def applied(table: MeshTable, text: str) -> Applied:
    line = parse_line(text)
    assert isinstance(line, TableLine)
    done = table.apply(line)
    assert done is not None
    return done


def test_a_link_local_coming_after_the_neighbour_moves_the_cables() -> None:
    """babeld met the far end before it said its own link-local (the link came up as DAD
    ran): the `change interface` that brings it is what completes the cable's ends."""
    table = MeshTable()
    assert moves_cables(applied(table, "add interface v1x2 up false"))
    assert moves_cables(applied(table, f"add {NEIGHBOUR} reach f800 rxcost 96 txcost 96 cost 96"))
    assert cable_ends_of(table)[0] == {}
    change = applied(table, "change interface v1x2 up true ipv6 fe80::a442:d9ff:feb1:c043")
    assert change.verb == "change" and moves_cables(change)
    interfaces, neighbours = cable_ends_of(table)
    assert interfaces == {"v1x2": IPv6Address("fe80::a442:d9ff:feb1:c043")}
    assert neighbours == [("v1x2", IPv6Address("fe80::e041:5dff:fecc:98a1"))]


def test_a_neighbours_costs_do_not_move_the_cables_its_going_does() -> None:
    table = MeshTable()
    applied(table, f"add {NEIGHBOUR} reach f800 rxcost 96 txcost 96 cost 96")
    assert not moves_cables(
        applied(table, f"change {NEIGHBOUR} reach ffff rxcost 96 txcost 96 cost 96")
    )
    assert moves_cables(applied(table, f"flush {NEIGHBOUR}"))
