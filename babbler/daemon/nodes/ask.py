"""Asking another node for its info (answer.py is the answer's side, checked.py what an
answer must be)."""

from __future__ import annotations

from ipaddress import IPv6Address

import trio

from babbler.daemon.nodes.answer import ANSWER_CAP, COUNTERS, PUSH, REQUEST
from babbler.daemon.nodes.checked import BadInfo, Info, parse, parse_counters

ASK_TIMEOUT = 5.0  # seconds for the whole exchange
# For a `counters` ask: a viewer asks each second, and an answer later than this is no use
# to it (the node is asked again the next second). Seconds.
COUNTERS_TIMEOUT = 2.0


class AskFailed(Exception):
    """The node did not answer, or not with node info; the message says which."""


class BadAnswer(AskFailed):
    """The node answered, with something checked.py refuses (`bad node info: ...`)."""


async def ask(address: IPv6Address, port: int) -> Info:
    """One `info` exchange with the node at `address`: its answer, checked. Raises AskFailed
    (BadAnswer for an answer checked.py refuses)."""
    data = await _exchange(address, port, REQUEST, ASK_TIMEOUT)
    try:
        return parse(data)
    except BadInfo as error:
        raise BadAnswer(f"bad node info: {error}") from None


async def ask_counters(address: IPv6Address, port: int, node_id: str) -> Info:
    """One `counters` exchange with the node `node_id` at `address`: its link counters,
    checked (checked.parse_counters). Raises AskFailed (BadAnswer: `bad counters: ...`)."""
    data = await _exchange(address, port, COUNTERS, COUNTERS_TIMEOUT)
    if data.startswith(b"bad ") and data.count(b"\n") == 1 and len(data) <= 64:
        # its own refusal: an older babblerd (`bad request`), or asked too often
        said = data.decode(errors="replace").strip().encode("unicode_escape").decode()
        raise AskFailed(f"the node answered {said!r}")
    try:
        return parse_counters(data, node_id)
    except BadInfo as error:
        raise BadAnswer(f"bad counters: {error}") from None


async def _exchange(address: IPv6Address, port: int, request: bytes, within: float) -> bytes:
    """Send one request line, read the answer until the node closes (at most one byte past
    ANSWER_CAP, which the checks refuse). Raises AskFailed."""
    data = b""
    with trio.move_on_after(within) as scope:
        try:
            stream = await trio.open_tcp_stream(str(address), port)
        except OSError as error:
            raise AskFailed(f"cannot connect: {error.strerror or error}") from None
        async with stream:
            try:
                await stream.send_all(request + b"\n")
                while len(data) <= ANSWER_CAP and (chunk := await stream.receive_some(65536)):
                    data += chunk
            except (trio.BrokenResourceError, OSError) as error:
                raise AskFailed(f"connection broke: {error}") from None
    if scope.cancelled_caught:
        raise AskFailed(f"no answer within {within:g} s")
    return data


async def push(address: IPv6Address, port: int, info: bytes, source: IPv6Address) -> None:
    """Give the node at `address` our own `info` (one JSON line), from our node address
    `source` (the node takes a push only from the pusher's own node address). Raises
    AskFailed when it is not taken."""
    reply = b""
    with trio.move_on_after(ASK_TIMEOUT) as scope:
        try:
            stream = await trio.open_tcp_stream(str(address), port, local_address=str(source))
        except OSError as error:
            raise AskFailed(f"cannot connect: {error.strerror or error}") from None
        async with stream:
            try:
                await stream.send_all(PUSH + b"\n" + info)
                while len(reply) <= 64 and (chunk := await stream.receive_some(65)):
                    reply += chunk
            except (trio.BrokenResourceError, OSError) as error:
                raise AskFailed(f"connection broke: {error}") from None
    if scope.cancelled_caught:
        raise AskFailed(f"no answer within {ASK_TIMEOUT:g} s")
    if reply.strip() != b"ok":
        said = reply.decode(errors="replace").strip()[:64] or "nothing"
        raise AskFailed(f"push not taken: {said!r}")
