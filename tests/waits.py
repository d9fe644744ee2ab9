"""Waiting in tests: for nothing to come (the wait must run out; an answer, or the end of a
connection, fails)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio


async def nothing_within(
    seconds: float, receive: Callable[[], Awaitable[object]], what: str
) -> None:
    """Fail if `receive()` returns within `seconds`: anything it gives, None at the end of a
    connection included, is something where nothing was expected."""
    with trio.move_on_after(seconds) as waited:
        got = await receive()
    assert waited.cancelled_caught, f"{what}: {got!r}"
