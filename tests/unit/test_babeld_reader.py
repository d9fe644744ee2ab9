"""The thread that reads babeld: repeats never reach the trio loop, lines cut across reads
are whole, the counts are kept, the end of the connection is told, `stop` ends it."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from typing import Any

import trio

from babbler.core.lines import LineSplitter
from babbler.daemon.babeld.control import LineCounts
from babbler.daemon.babeld.reader import ThreadedReader

ROUTE = b"change route r1 prefix fde0::1/128 metric 96"


async def until(check: Callable[[], bool]) -> None:
    """Wait until `check()` holds (the reader thread has got that far); bounded."""
    with trio.fail_after(5):
        while not check():
            await trio.sleep(0.01)


def started(
    ours: socket.socket,
    counts: LineCounts | None = None,
    first: list[bytes] | None = None,
    **options: Any,
) -> ThreadedReader:
    """A reader of `ours` (the daemon's end of a socket pair), started."""
    reader = ThreadedReader(
        trio.socket.from_stdlib_socket(ours), LineSplitter(4096), counts or LineCounts(), **options
    )
    reader.start(first or [])
    return reader


async def test_only_real_lines_wake_the_loop_and_the_end_is_told() -> None:
    ours, babeld = socket.socketpair()
    counts = LineCounts()
    with ours, babeld:
        # the first line came with the greeting's read
        reader = started(ours, counts, first=[b"add route r1 prefix fde0::1/128 metric 96"])
        assert await reader.batch() == [b"add route r1 prefix fde0::1/128 metric 96"]
        babeld.sendall(ROUTE.replace(b"change", b"add") + b"\n" + ROUTE[:10])  # a repeat, cut
        babeld.sendall(ROUTE[10:] + b"\n")  # ... its end: a repeat too (same entry, same line)
        babeld.sendall(b"change route r1 prefix fde0::1/128 metric 128\nok\n")
        assert await reader.batch() == [b"change route r1 prefix fde0::1/128 metric 128", b"ok"]
        assert counts.lines_in == 5 and counts.repeats == 2
        babeld.shutdown(socket.SHUT_WR)
        assert await reader.batch() is None


async def test_stop_ends_the_thread() -> None:
    ours, babeld = socket.socketpair()
    with ours, babeld:
        reader = started(ours)
        before = threading.active_count()
        reader.stop()
        with trio.fail_after(5):
            assert await reader.batch() is None
            while threading.active_count() >= before:
                await trio.sleep(0.01)


async def test_stop_after_the_end_leaves_a_reused_descriptor_alone() -> None:
    """babeld gone, the thread closes its descriptor; a client connecting at that moment may
    get its number. stop() must not shut that client's socket down (seen in CI: a `status`
    asker cut off right after the header while babeld was being killed)."""
    ours, babeld = socket.socketpair()
    with ours:
        reader = started(ours)
        babeld.close()
        assert await reader.batch() is None
        await trio.to_thread.run_sync(reader._thread.join, 5)  # its descriptor closed
        client, peer = socket.socketpair()  # the lowest free numbers: the one just closed
        with client, peer:
            reader.stop()
            for one, other in ((peer, client), (client, peer)):  # either may hold it
                one.sendall(b"status\n")
                other.settimeout(5)
                assert other.recv(100) == b"status\n"


def rtt(neighbour: str, value: str) -> bytes:
    return f"change neighbour {neighbour} address fe80::2 if v1x2 rtt {value}".encode()


async def test_unwatched_neighbour_changes_wait_and_keep_their_order() -> None:
    """While nobody watches, rtt changes do not wake the loop; the latest per neighbour is
    handed over in front of the next other line, on `take_held`, or when holding ends."""
    ours, babeld = socket.socketpair()
    counts = LineCounts()
    with ours, babeld:
        reader = started(ours, counts, hold=True)
        babeld.sendall(b"\n".join([rtt("a", "1"), rtt("b", "1"), rtt("a", "2")]) + b"\n")
        await until(lambda: counts.lines_in == 3)  # read: held, no batch for the loop
        assert counts.held == 3
        babeld.sendall(ROUTE + b"\n")  # anything else takes them along, in front of it
        assert await reader.batch() == [rtt("a", "2"), rtt("b", "1"), ROUTE]
        assert reader.take_held() == []

        babeld.sendall(rtt("a", "3") + b"\n" + rtt("b", "2") + b"\n")
        with trio.fail_after(5):
            while not (held := reader.take_held()):
                await trio.sleep(0.01)  # the table is read: the latest of each, now
        assert sorted(held) == [rtt("a", "3"), rtt("b", "2")]

        babeld.sendall(rtt("a", "4") + b"\n")
        await until(lambda: counts.held >= 6)
        reader.hold(False)  # someone watches: what waited comes at once, then every line
        assert await reader.batch() == [rtt("a", "4")]
        babeld.sendall(rtt("a", "5") + b"\n")
        assert await reader.batch() == [rtt("a", "5")]


async def test_held_lines_never_overtake_a_batch_the_loop_has_not_taken() -> None:
    ours, babeld = socket.socketpair()
    counts = LineCounts()
    with ours, babeld:
        reader = started(ours, counts, hold=True)
        flush = b"flush neighbour a address fe80::2 if v1x2"
        babeld.sendall(flush + b"\n")
        # read and handed over (one step, under the reader's lock)
        await until(lambda: counts.lines_in >= 1)
        babeld.sendall(rtt("a", "2") + b"\n")
        await until(lambda: counts.held >= 1)
        assert reader.take_held() == [], "a held change would be applied before the flush"
        assert await reader.batch() == [flush]
        assert reader.take_held() == [rtt("a", "2")]


class GatherClock(threading.Event):
    """The reader's `_resume` on a clock the test moves: its gathering wait
    (`wait(gather)`) ends when the event is set (a request, a watcher) or when the test lets
    the gathering time pass (`pass_time`), never by itself; `waits` counts the waits begun
    and `timeouts` says what each was given."""

    def __init__(self) -> None:
        super().__init__()
        self._condition = threading.Condition()
        self._set = False
        self._passed = 0  # the waits whose time has passed
        self.waits = 0
        self.timeouts: list[float | None] = []

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        with self._condition:
            self._set = True
            self._condition.notify_all()

    def clear(self) -> None:
        with self._condition:
            self._set = False

    def wait(self, timeout: float | None = None) -> bool:
        with self._condition:
            self.waits += 1
            self.timeouts.append(timeout)
            mine = self.waits
            self._condition.wait_for(lambda: self._set or self._passed >= mine)
            return self._set

    def pass_time(self) -> None:
        """The gathering time of the wait under way runs out."""
        with self._condition:
            self._passed = self.waits
            self._condition.notify_all()


async def test_unwatched_lines_gather_but_answers_and_watchers_do_not_wait() -> None:
    """While nobody watches, babeld's lines wait `gather` seconds between reads (one batch,
    not one per burst); a request's answer and a new watcher end the wait at once."""
    ours, babeld = socket.socketpair()
    counts = LineCounts()
    requests: list[str] = []
    asked: list[int] = []  # the lines read by each time the thread asked for a request

    def awaiting() -> bool:
        asked.append(counts.lines_in)
        return bool(requests)

    clock = GatherClock()
    with ours, babeld:
        reader = ThreadedReader(
            trio.socket.from_stdlib_socket(ours),
            LineSplitter(4096),
            counts,
            hold=True,
            gather=5.0,
            awaiting=awaiting,
        )
        reader._resume = clock
        reader.start([])
        babeld.sendall(ROUTE + b"\n")
        assert await reader.batch() == [ROUTE]  # read at once; now it lets lines gather
        await until(lambda: clock.waits == 1)
        assert clock.timeouts == [5.0]
        second = ROUTE.replace(b"96", b"128")
        babeld.sendall(second + b"\n")
        babeld.sendall(ROUTE + b"\n")
        clock.pass_time()  # gathered: both at once
        assert await reader.batch() == [second, ROUTE]
        assert counts.lines_in == 3

        await until(lambda: clock.waits == 2)  # gathering again
        babeld.sendall(second + b"\n")
        requests.append("interface v1x3")  # a request: the wait ends, its answer is read
        reader.wake()
        babeld.sendall(b"ok\n")
        lines: list[bytes] = []
        with trio.fail_after(5):
            while b"ok" not in lines:
                lines += await reader.batch() or []
        assert lines == [second, b"ok"]
        await until(lambda: counts.lines_in in asked)  # after the answer: not gathering
        assert clock.waits == 2, "gathered while a request waited"
        requests.clear()

        babeld.sendall(ROUTE + b"\n")
        with trio.fail_after(5):
            assert await reader.batch() == [ROUTE]  # read at once, then gathering again
        await until(lambda: clock.waits == 3)
        reader.hold(False)  # a watcher: every line as it comes
        for line in (second, ROUTE):
            babeld.sendall(line + b"\n")
            with trio.fail_after(5):
                assert await reader.batch() == [line]


async def test_a_gone_neighbour_held_while_unwatched_does_not_come_back() -> None:
    """A neighbour's rtt change waits (nobody watches); then babeld's whole table comes
    without that neighbour: the held change goes to the loop ahead of the answer, and the
    flush after it, so nothing brings the neighbour back."""
    ours, babeld = socket.socketpair()
    counts = LineCounts()
    with ours, babeld:
        reader = started(ours, counts, hold=True)
        babeld.sendall(ROUTE + b"\n" + rtt("a", "1").replace(b"change", b"add") + b"\n")
        assert await reader.batch() == [ROUTE, rtt("a", "1").replace(b"change", b"add")]
        babeld.sendall(rtt("a", "2") + b"\n")
        await until(lambda: counts.held >= 1)
        reader.begin_census()
        babeld.sendall(ROUTE.replace(b"change", b"add") + b"\nok\n")  # `dump`: no neighbour a
        assert await reader.batch() == [rtt("a", "2"), b"ok"]  # the route did not change
        gone = [b"flush neighbour a address fe80::2 if v1x2 rtt 2"]
        assert reader.end_census(complete=True) == gone
        assert reader.take_held() == []
