"""The babeld line parser over the line shapes recorded from babeld 1.12.1 (BABELD.md)."""

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from babbler.babeld.protocol import (
    GreetingLine,
    ProtocolError,
    StatusLine,
    TableLine,
    parse_line,
)

RECORDED = [
    "add interface v1x2 up true ipv6 fe80::a442:d9ff:feb1:c043",
    "add neighbour 561fe7d982e0 address fe80::e041:5dff:fecc:98a1 if v1x2 reach f800 "
    "ureach 0000 rxcost 96 txcost 96 cost 96",
    "change neighbour 561fe7d982e0 address fe80::e041:5dff:fecc:98a1 if v1x2 reach ffff "
    "ureach 0000 rxcost 96 txcost 96 rtt 0.120 rttcost 0 cost 96",
    "add xroute fde0:20c6:1fa7:ffff:1:2:3:1/128-::/0 prefix fde0:20c6:1fa7:ffff:1:2:3:1/128 "
    "from ::/0 metric 0",
    "add route 561fe7d994c0 prefix fde0:20c6:1fa7:ffff:2::1/128 from ::/0 installed yes "
    "id 6c:f3:a1:86:c8:ca:f5:00 metric 96 refmetric 0 via fe80::e041:5dff:fecc:98a1 if v1x2",
    "flush route 561fe7d994c0 prefix fde0:20c6:1fa7:ffff:2::1/128 from ::/0 installed no "
    "id 6c:f3:a1:86:c8:ca:f5:00 metric 65535 refmetric 0 via fe80::e041:5dff:fecc:98a1 if v1x2",
]


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
    with pytest.raises(ProtocolError):
        parse_line(text)


@given(st.text(max_size=200))
def test_any_text_parses_or_raises_protocol_error(text: str) -> None:
    with contextlib.suppress(ProtocolError):
        parse_line(text)
