"""The thread that reads babeld: repeats never reach the trio loop, lines cut across reads
are whole, the counts are kept, the end of the connection is told, `stop` ends it."""

from __future__ import annotations

import socket
import threading

import trio

from babbler.babeld.control import LineCounts
from babbler.babeld.reader import ThreadedReader
from babbler.lines import LineSplitter

ROUTE = b"change route r1 prefix fde0::1/128 metric 96"


async def test_only_real_lines_wake_the_loop_and_the_end_is_told() -> None:
    ours, babeld = socket.socketpair()
    counts = LineCounts()
    with ours, babeld:
        reader = ThreadedReader(trio.socket.from_stdlib_socket(ours), LineSplitter(4096), counts)
        reader.start([b"add route r1 prefix fde0::1/128 metric 96"])  # from the greeting's read
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
        reader = ThreadedReader(
            trio.socket.from_stdlib_socket(ours), LineSplitter(4096), LineCounts()
        )
        reader.start([])
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
        reader = ThreadedReader(
            trio.socket.from_stdlib_socket(ours), LineSplitter(4096), LineCounts()
        )
        reader.start([])
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
