"""The babeld line parser over the line shapes recorded from babeld 1.12.1 (BABELD.md)."""

import pytest

from babbler.core.babeld_lines import (
    GreetingLine,
    MalformedLine,
    StatusLine,
    TableLine,
    parse_line,
)
from tests.unit.recorded import RECORDED


@pytest.mark.parametrize("text", RECORDED)
def test_recorded_table_lines_parse_and_render_back(text: str) -> None:
    line = parse_line(text)
    assert isinstance(line, TableLine)
    assert line.render() == text


def test_fields_are_read_by_name() -> None:
    line = parse_line(RECORDED[4])
    assert isinstance(line, TableLine)
    assert line.key == ("route", "561fe7d994c0")
    assert line.field("installed") == "yes"
    assert line.field("if") == "v1x2"
    assert line.field("absent") is None


def test_greeting_and_status_lines() -> None:
    assert parse_line("BABEL 1.0") == GreetingLine("BABEL", "1.0")
    assert parse_line("my-id 6c:f3:a1:86:c8:ca:f5:00") == GreetingLine(
        "my-id", "6c:f3:a1:86:c8:ca:f5:00"
    )
    assert parse_line("ok") == StatusLine("ok")
    assert parse_line("no No such interface") == StatusLine("no", "No such interface")
    assert parse_line("bad") == StatusLine("bad")


@pytest.mark.parametrize("text", ["", "hello", "add", "add gizmo 1 a b", "add route 1 prefix"])
def test_malformed_lines_raise(text: str) -> None:
    with pytest.raises(MalformedLine):
        parse_line(text)


def test_repeats_are_told_from_the_raw_text_per_entry() -> None:
    from babbler.core.babeld_lines import RepeatFilter

    repeats = RepeatFilter()
    neighbour = RECORDED[2].encode()  # a `change neighbour` line
    assert not repeats.is_repeat(neighbour)
    assert repeats.is_repeat(neighbour)  # babeld's identical repeat
    assert repeats.is_repeat(neighbour.replace(b"change", b"add", 1))  # same entry, same body
    changed = neighbour.replace(b"reach ffff", b"reach fffe")
    assert not repeats.is_repeat(changed)  # a real change passes
    other = neighbour.replace(b"561fe7d982e0", b"561fe7d982e1")
    assert not repeats.is_repeat(other)  # another entry has its own last line
    flush = b"flush " + changed.split(b" ", 1)[1]
    assert not repeats.is_repeat(flush)
    assert not repeats.is_repeat(changed)  # after a flush the entry starts anew
    for line in (b"ok", b"no", b"bad", b"BABEL 1.0", b"my-id 02:00:00:00:00:00:00:01"):
        assert not repeats.is_repeat(line) and not repeats.is_repeat(line)


def test_a_whole_table_again_tells_what_is_gone_and_nothing_more() -> None:
    """`dump` (or `monitor`'s snapshot) on a connection that read babeld's table before: the
    entries that did not change are repeats, and the ones it no longer names are flushed."""
    from babbler.core.babeld_lines import RepeatFilter

    door = RepeatFilter()
    first = [b"add route r1 prefix fde0::1/128 metric 96", b"add route r2 prefix fde0::2/128"]
    first += [b"add neighbour n1 address fe80::2 rtt 0.1"]
    assert not any(door.is_repeat(line) for line in first)
    door.begin_census()
    assert door.is_repeat(b"add route r1 prefix fde0::1/128 metric 96")  # unchanged
    assert not door.is_repeat(b"add neighbour n1 address fe80::2 rtt 0.2")  # changed
    assert not door.is_repeat(b"add route r3 prefix fde0::3/128")  # new
    assert door.end_census() == [b"flush route r2 prefix fde0::2/128"]
    assert door.end_census() == []  # no census: nothing concluded
    assert not door.is_repeat(b"add route r2 prefix fde0::2/128")  # forgotten: new again

    door.begin_census()  # a table that never came whole concludes nothing
    assert door.end_census(complete=False) == []
    assert door.is_repeat(b"change route r3 prefix fde0::3/128")
