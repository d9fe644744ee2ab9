"""Fuzzing the two parsers that read bytes from others: client requests (anyone on the
machine) and babeld's control lines (then applied to the mesh table), and the line reader
under arbitrary chunking. Bounded budget: FUZZ_EXAMPLES examples each (default 2,000, about
10 s in all here); raise it for a long local run."""

from __future__ import annotations

import os

import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from babbler.core.babeld_lines import MalformedLine, TableLine, parse_line
from babbler.core.lines import TOO_LONG, LineSplitter
from babbler.core.table import MeshTable
from babbler.daemon.linereader import LineReader
from babbler.daemon.requests import REQUESTS, BadRequest, parse_request
from tests.unit.recorded import RECORDED

BUDGET = settings(
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "2000")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

words = st.sampled_from(
    sorted({w for line in RECORDED for w in line.split()} | {"", "yes", "no", "-1", "∞"})
)
babeld_like = st.lists(words, min_size=0, max_size=24).map(" ".join)


@BUDGET
@given(st.one_of(st.binary(max_size=5000), st.sampled_from(list(REQUESTS)).map(str.encode)))
def test_requests_parse_or_are_refused_in_one_printable_line(raw: bytes) -> None:
    try:
        name = parse_request(raw)
    except BadRequest as error:
        assert str(error).isprintable() and len(str(error)) < 200
    else:
        assert name is None or name in REQUESTS


@BUDGET
@given(st.lists(st.one_of(babeld_like, st.text(max_size=300)), max_size=30))
def test_any_babeld_lines_keep_the_monitor_stream_consistent(texts: list[str]) -> None:
    """Whatever babeld sends, a client following the forwarded lines never gets an `add`
    of an entry it has, nor a `change` or `flush` of one it lacks, and ends up with the
    table's own dump."""
    table = MeshTable()
    client: dict[tuple[str, str], str] = {}
    for text in texts:
        try:
            line = parse_line(text)
        except MalformedLine:
            continue
        if not isinstance(line, TableLine):
            continue
        applied = table.apply(line)
        if applied is None:
            continue
        forwarded = parse_line(applied.line)
        assert isinstance(forwarded, TableLine)
        if forwarded.verb == "add":
            assert forwarded.key not in client
        else:
            assert forwarded.key in client
        if forwarded.verb == "flush":
            del client[forwarded.key]
        else:
            client[forwarded.key] = forwarded.render("add")
    assert sorted(client.values()) == sorted(table.dump_lines())


class Chunks(trio.abc.ReceiveStream):
    """A stream that delivers exactly the given chunks, one per receive."""

    def __init__(self, chunks: list[bytes]) -> None:
        self._chunks = [c for c in chunks if c]

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        await trio.lowlevel.checkpoint()
        return self._chunks.pop(0) if self._chunks else b""

    async def aclose(self) -> None:
        pass


@BUDGET
@given(
    st.lists(st.binary(max_size=80).map(lambda b: b.replace(b"\n", b"")), max_size=20),
    st.lists(st.integers(min_value=1, max_value=64), min_size=1, max_size=20),
)
def test_line_reader_reassembles_any_chunking(lines: list[bytes], cuts: list[int]) -> None:
    """Whatever the chunks, readline and the splitter fed directly (as babeld's reader
    thread feeds it) give the same lines, capped."""
    data = b"".join(line + b"\n" for line in lines)
    chunks, at = [], 0
    for size in cuts * (len(data) // max(1, sum(cuts)) + 1):
        chunks.append(data[at : at + size])
        at += size
    chunks.append(data[at:])

    async def read_all() -> list[bytes | object]:
        reader = LineReader(Chunks(chunks), max_line=32)
        out: list[bytes | object] = []
        while (got := await reader.readline()) is not None:
            out.append(got)
        return out

    splitter = LineSplitter(max_line=32)
    fed = [line for chunk in chunks for line in splitter.feed(chunk)]
    want = [TOO_LONG if len(line) > 32 else line.removesuffix(b"\r") for line in lines]
    assert trio.run(read_all) == want
    assert fed == want


@BUDGET
@given(st.lists(st.one_of(babeld_like, st.sampled_from(RECORDED)), max_size=40))
def test_dropping_repeats_at_the_door_changes_no_table_and_no_real_change(
    texts: list[str],
) -> None:
    """What babblerd drops before parsing is exactly what the table would have found
    identical: the table and every real (watch) change come out the same."""
    from babbler.core.babeld_lines import RepeatFilter

    def feed(lines: list[str]) -> tuple[list[str], list[tuple[str, str]]]:
        table, real = MeshTable(), []
        for text in lines:
            try:
                line = parse_line(text)
            except MalformedLine:
                continue
            if isinstance(line, TableLine) and (applied := table.apply(line)) and applied.real:
                real.append((applied.verb, applied.line))
        return table.dump_lines(), real

    door = RepeatFilter()
    assert feed([t for t in texts if not door.is_repeat(t.encode())]) == feed(texts)
