import pytest
import trio
import trio.testing

from babbler.core.lines import TOO_LONG
from babbler.daemon.linereader import LineReader
from babbler.daemon.requests import REQUESTS, BadRequest, help_lines, parse_request


def test_known_requests_parse() -> None:
    for name in REQUESTS:
        assert parse_request(name.encode()) == name
    assert parse_request(b"  status  ") == "status"
    assert parse_request(b"   ") is None


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"\xff\xfe", "not UTF-8"),
        (b"interface eth0", "unknown request 'interface'"),
        (b"dump now", "dump takes no arguments"),
        (b"\x1b[31m", "unknown request"),
    ],
)
def test_bad_requests_say_why(raw: bytes, reason: str) -> None:
    with pytest.raises(BadRequest, match=reason.replace("[", r"\[")):
        parse_request(raw)


def test_help_lists_every_request() -> None:
    assert [line.split(":")[0] for line in help_lines()] == list(REQUESTS)


async def test_line_reader_caps_lines_and_recovers() -> None:
    send, receive = trio.testing.memory_stream_pair()
    reader = LineReader(receive, max_line=10)
    await send.send_all(b"short\r\n" + b"x" * 50)
    assert await reader.readline() == b"short"
    await send.send_all(b"y" * 100000 + b"\nnext\n")
    assert await reader.readline() is TOO_LONG
    assert await reader.readline() == b"next"
    await send.aclose()
    assert await reader.readline() is None
