"""Asking another node for its info (answer.py is the answer's side)."""

from __future__ import annotations

import json
from ipaddress import IPv6Address
from typing import Any

import trio

from babbler.daemon.nodes.answer import ANSWER_CAP, REQUEST

ASK_TIMEOUT = 5.0  # seconds for the whole exchange


class AskFailed(Exception):
    """The node did not answer, or not with node info; the message says which."""


async def ask(address: IPv6Address, port: int) -> dict[str, Any]:
    """One `info` exchange with the node at `address`. Raises AskFailed."""
    data = b""
    with trio.move_on_after(ASK_TIMEOUT) as scope:
        try:
            stream = await trio.open_tcp_stream(str(address), port)
        except OSError as error:
            raise AskFailed(f"cannot connect: {error.strerror or error}") from None
        async with stream:
            try:
                await stream.send_all(REQUEST + b"\n")
                while len(data) <= ANSWER_CAP and (chunk := await stream.receive_some(65536)):
                    data += chunk
            except (trio.BrokenResourceError, OSError) as error:
                raise AskFailed(f"connection broke: {error}") from None
    if scope.cancelled_caught:
        raise AskFailed(f"no answer within {ASK_TIMEOUT:g} s")
    if len(data) > ANSWER_CAP:
        raise AskFailed(f"answer longer than {ANSWER_CAP} bytes")
    try:
        value = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise AskFailed(f"not node info: {data[:40]!r}") from None
    if not isinstance(value, dict):
        raise AskFailed("not node info: not an object")
    return value
