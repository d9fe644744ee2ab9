"""A client's direct writes and its queue: order kept, whole lines at a farewell. Who gets
in: each user within their share, room kept for root."""

from __future__ import annotations

import trio
from hypothesis import given
from hypothesis import strategies as st

from babbler.daemon.fanout import Client, Hub, Limits


class Socket:
    """Takes up to `room` bytes per write, then would block, like a full socket buffer."""

    def __init__(self, rooms: list[int]) -> None:
        self.rooms = rooms
        self.got = b""

    def send(self, data: bytes) -> int:
        room = self.rooms.pop(0) if self.rooms else 0
        if room == 0:
            raise BlockingIOError
        taken = data[:room]
        self.got += taken
        return len(taken)


lines = st.lists(st.text("abc", min_size=0, max_size=30).map(lambda t: t + "\n"), max_size=20)


@given(st.lists(lines, min_size=1, max_size=8), st.lists(st.integers(0, 60), max_size=12))
def test_direct_writes_then_queue_keep_order_and_end_whole(
    offers: list[list[str]], rooms: list[int]
) -> None:
    sock = Socket(rooms)
    client = Client(1, sock.send)
    for offer in offers:
        client.offer("".join(offer))
    sent_or_queued = sock.got + b"".join(client._queue)
    assert sent_or_queued == "".join("".join(o) for o in offers).encode()
    # Cut off now: what the client saw plus the rest of its open line is whole lines.
    farewell = sock.got + client.unfinished
    assert farewell == b"" or farewell.endswith(b"\n")
    assert sent_or_queued.startswith(farewell)


def test_nothing_goes_direct_while_something_is_queued_or_in_flight() -> None:
    async def main() -> None:
        sock = Socket([3, 100, 100])
        client = Client(1, sock.send)
        client.offer("hello\n")  # 3 bytes direct, the rest queued
        client.offer("world\n")  # queued behind it, not direct
        assert sock.got == b"hel" and client.unfinished == b"lo\n"
        batch = await client.next_batch()
        assert batch == b"lo\nworld\n"
        client.offer("later\n")  # the writer holds a batch: queued
        assert sock.got == b"hel"
        client.batch_sent()
        assert client.unfinished == b""
        client.offer("now\n")  # the queue holds "later": still queued, in order
        assert await client.next_batch() == b"later\nnow\n"

    trio.run(main)


def test_one_user_cannot_take_the_room_kept_for_root_or_lock_out_other_users() -> None:
    """The issue's finding: `nobody` held 1,030 connections and root's `status` was refused."""
    hub = Hub(limits=Limits(max_clients=10, kept_for_root=3, per_user=4))
    alice, bob, carol = 70001, 70002, 70003  # not the test's own user, which counts as root

    def fill(uid: int | None) -> int:
        """Connect as `uid` until refused; how many got in."""
        admitted = 0
        while hub.admits(uid):
            hub.new_client(uid=uid)
            admitted += 1
        return admitted

    assert fill(alice) == 4  # her own cap
    assert fill(bob) == 3  # the others' share (10 - 3) is full before his cap
    assert fill(carol) == 0
    assert fill(0) == 3  # root: the room kept, then the total
    assert not hub.admits(0)
    mine = next(c for c in hub.clients if c.uid == alice)
    hub.drop(mine)
    hub.drop(mine)  # a second drop changes nothing
    assert fill(carol) == 1 and fill(None) == 0  # an unknown user is one more other user
    for client in [c for c in hub.clients if c.uid == 0]:
        hub.drop(client)
    assert fill(0) == 3
