from babbler.core.babeld_lines import TableLine, parse_line
from babbler.core.table import MeshTable, is_usable, route_view


def line(text: str) -> TableLine:
    parsed = parse_line(text)
    assert isinstance(parsed, TableLine)
    return parsed


ROUTE = (
    "route 1 prefix fde0:20c6:1fa7:ffff:2::1/128 from ::/0 installed yes id a:b metric 96 "
    "refmetric 0 via fe80::1 if v1x2"
)


def test_add_then_identical_change_is_forwarded_but_not_a_real_change() -> None:
    table = MeshTable()
    first = table.apply(line("add " + ROUTE))
    assert first is not None and first.real and first.line == "add " + ROUTE
    again = table.apply(line("change " + ROUTE))
    assert again is not None and not again.real and again.line == "change " + ROUTE


def test_duplicate_add_is_dropped_and_differing_add_becomes_change() -> None:
    table = MeshTable()
    table.apply(line("add " + ROUTE))
    assert table.apply(line("add " + ROUTE)) is None
    moved = table.apply(line("add " + ROUTE.replace("metric 96", "metric 192")))
    assert moved is not None and moved.verb == "change" and moved.line.startswith("change route 1 ")


def test_change_of_unknown_becomes_add_and_flush_of_unknown_is_dropped() -> None:
    table = MeshTable()
    assert table.apply(line("flush " + ROUTE)) is None
    created = table.apply(line("change " + ROUTE))
    assert created is not None and created.line.startswith("add route 1 ")
    gone = table.apply(line("flush " + ROUTE))
    assert gone is not None and gone.verb == "flush" and len(table) == 0


def test_flush_all_yields_flush_for_every_entry_in_dump_order() -> None:
    table = MeshTable()
    table.apply(line("add " + ROUTE))
    table.apply(line("add interface v1x2 up true ipv6 fe80::1"))
    assert table.dump_lines()[0].startswith("add interface v1x2")
    flushed = [a.line for a in table.flush_all()]
    assert flushed == ["flush interface v1x2 up true ipv6 fe80::1", "flush " + ROUTE]
    assert table.dump_lines() == []


def test_route_view_and_usability() -> None:
    view = route_view(line("add " + ROUTE))
    assert view == {
        "prefix": "fde0:20c6:1fa7:ffff:2::1/128",
        "router_id": "a:b",
        "metric": 96,
        "refmetric": 0,
        "installed": True,
        "via": "fe80::1",
        "interface": "v1x2",
    }
    assert is_usable(view)
    assert not is_usable({**view, "metric": 65535})
    assert not is_usable({**view, "installed": False})


def test_a_redump_flushes_only_what_it_lacks() -> None:
    table = MeshTable()
    kept = line("add neighbour n1 address fe80::2 if v1x2 reach ffff")
    gone = line("add xroute x1 prefix fde0::1/128 from ::/0 metric 0")
    for entry in (kept, gone):
        table.apply(entry)
    assert table.end_resync() == []  # no re-dump under way: nothing to flush
    table.begin_resync()
    assert table.apply(kept) is None  # the same entry again: nothing to forward
    flushed = table.end_resync()
    assert [a.line for a in flushed] == [gone.render("flush")]
    assert table.dump_lines() == [kept.render("add")]
    assert table.end_resync() == []


def test_babeld_s_end_is_said_as_people_say_it_without_its_chatter() -> None:
    from babbler.core.babeld_lines import telling
    from babbler.core.errors import BabeldExited

    chatter = [
        "ioctl(SIOCGIWNAME): Inappropriate ioctl for device",
        "Warning: couldn't determine whether v3x2 (2) is a wireless interface.",
    ]
    assert str(BabeldExited(-9, telling(chatter))) == "babeld killed by SIGKILL"
    told = telling([*chatter, "Couldn't bind to port 6696: Address in use"])
    assert str(BabeldExited(1, told)) == (
        "babeld exited with status 1: Couldn't bind to port 6696: Address in use"
    )
    assert str(BabeldExited(-99)) == "babeld killed by signal 99"


def test_memo_is_kept_until_an_entry_changes() -> None:
    """`MeshTable.memo`: a reading of the whole table is made once between changes (the far
    ends, read for every node info built and every answer taken), and afresh after any
    change, a flush, a re-dump's end or flush_all; an identical line changes nothing."""
    table = MeshTable()
    made: list[int] = []

    def count(t: MeshTable) -> int:
        made.append(len(t))
        return len(t)

    assert table.memo("n", count) == 0 and table.memo("n", count) == 0 and made == [0]
    table.apply(line("add " + ROUTE))
    assert table.memo("n", count) == 1
    table.apply(line("change " + ROUTE))  # the same fields: not a change
    assert table.memo("n", count) == 1 and made == [0, 1]
    table.apply(line("change " + ROUTE.replace("metric 96", "metric 192")))
    assert table.memo("n", count) == 1 and made == [0, 1, 1]
    table.begin_resync()
    table.end_resync()  # the re-dump brought nothing: the route is flushed
    assert table.memo("n", count) == 0
    table.apply(line("add " + ROUTE))
    table.flush_all()
    assert table.memo("n", count) == 0 and made == [0, 1, 1, 0, 0]
