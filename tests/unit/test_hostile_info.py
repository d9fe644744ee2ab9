"""A hostile node's info answer, over real TCP on loopback: refused on arrival with the
node's `error`, and the node info service (the book, `status.nodes`, `watch`) serves on."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from ipaddress import IPv6Address
from typing import Any

import pytest
import trio

from babbler.core.addressing import format_node_id, node_address
from babbler.daemon.fanout import Hub
from babbler.daemon.nodes import ask
from babbler.daemon.nodes.service import NodeService
from babbler.daemon.wakeup import Signal
from tests.unit.test_nodes import route

EVIL, GOOD = 0xE, 0x600D
EVIL_ID = format_node_id(EVIL)


def answer(**fields: Any) -> bytes:
    return (json.dumps({"node_id": EVIL_ID, "name": "evil", **fields}) + "\n").encode()


def raw(text: str) -> bytes:
    """An answer written by hand: what json.dumps would never write."""
    return f'{{"node_id": "{EVIL_ID}", {text}}}\n'.encode()


# What killed babblerd (issue 29), and what reached a terminal raw; each with its error.
HOSTILE = {
    "unhashable neighbour": (
        answer(neighbours=[{"node_id": [1]}]),
        "neighbours[0].node_id: expected 12 lowercase hex digits or null, got a list",
    ),
    "5,000 digits": (raw('"uptime_s": ' + "9" * 5000), "a number of more than 20 digits"),
    "5,000 deep": (raw('"info": ' + "[" * 5000 + "]" * 5000), "nested deeper than 16"),
    "name a number": (answer(name=5), "name: expected text of 1 to 64 characters, got a number"),
    "interfaces a number": (answer(interfaces=5), "interfaces: expected a list, got a number"),
    "NaN": (raw('"uptime_s": NaN'), "NaN is not a number node info may hold"),
    # An unclosed string of escaped quotes: the depth scan once took 0.76 s over it.
    "an unclosed string": (
        b'"' + b'\\"' * 8000,
        "not JSON (Unterminated string starting at character 0)",
    ),
    "1e999": (raw('"uptime_s": 1e999'), "a number out of range"),
    "clear screen in the name": (
        answer(name="\x1b[2Jn1"),
        "name: control character U+001B",
    ),
    "a fake row in the version": (
        answer(version="0.1\n  n9  fake"),
        "version: control character U+000A",
    ),
    "a title escape in a zone": (
        answer(neighbours=[{"address": "fe80::1%\x1b]0;pwned\x07", "interface": "e0"}]),
        "neighbours[0].address: an address with a zone (%...)",
    ),
    "a bidi override in info": (
        answer(info={"role": "\u202eredro"}),
        "info.role: control character U+202E",
    ),
    "nested info": (
        answer(info={"role": {"a": 1}}),
        "info.role: expected text, a number or a boolean, got an object",
    ),
    "a link name with a slash": (
        answer(interfaces=[{"name": "../e", "kind": "ethernet", "cost": 32}]),
        "interfaces[0].name: not an interface name Linux or macOS allows",
    ),
    "a cost of true": (
        answer(interfaces=[{"name": "e0", "kind": "ethernet", "cost": True}]),
        "interfaces[0].cost: expected an integer or null, got a boolean",
    ),
    "a cable to nowhere": (
        answer(cables=[{"interface": "e0", "address": "10.0.0.1", "peer": "fe80::1"}]),
        "cables[0].peer: not an IPv4 address",
    ),
    "not an object": (b"[1, 2]\n", "the answer: expected an object, got a list"),
    "not UTF-8": (b'{"name": "\xff"}\n', "not UTF-8"),
}


@asynccontextmanager
async def fake_node(answers: Callable[[], bytes]) -> AsyncIterator[int]:
    """A TCP server on ::1 that answers every connection with `answers()`: its port."""

    async def one(stream: trio.SocketStream) -> None:
        async with stream:
            await stream.receive_some(64)
            await stream.send_all(answers())

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, one, 0, host="::1"))
        yield listeners[0].socket.getsockname()[1]
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize(("data", "error"), HOSTILE.values(), ids=HOSTILE.keys())
async def test_a_hostile_answer_is_refused_saying_what_is_wrong(data: bytes, error: str) -> None:
    async with fake_node(lambda: data) as port:
        with pytest.raises(ask.AskFailed) as refused:
            await ask.ask(IPv6Address("::1"), port)
    assert str(refused.value) == f"bad node info: {error}"


async def test_a_good_answer_comes_checked_with_unknown_keys_dropped() -> None:
    good = answer(
        uptime_s=12.5,
        interfaces=[{"name": "e0", "kind": "ethernet", "speed_mbps": 10000, "cost": 32}],
        neighbours=[{"node_id": None, "interface": "e0", "address": "FE80::0002"}],
        info={"role": "worker", "gpus": 8},
        later={"a field": "of a later version"},
    )
    async with fake_node(lambda: good) as port:
        info = await ask.ask(IPv6Address("::1"), port)
    assert "later" not in info and info["name"] == "evil" and info["uptime_s"] == 12.5
    assert info["neighbours"] == [{"node_id": None, "interface": "e0", "address": "fe80::2"}]
    assert info["interfaces"][0]["max_mtu"] is None and info["cables"] == []


@pytest.mark.parametrize(("data", "error"), HOSTILE.values(), ids=HOSTILE.keys())
async def test_the_service_serves_on_whatever_a_node_answers(data: bytes, error: str) -> None:
    """With a `watch` client open: the node carries the error and nothing of its answer,
    the other node is asked and named, status and watch keep working."""
    hub = Hub()
    watcher = hub.new_client()
    watcher.watch = True
    hub.subscription_changed()
    good = (json.dumps({"node_id": format_node_id(GOOD), "name": "good"}) + "\n").encode()
    async with fake_node(lambda: data) as evil_port, fake_node(lambda: good) as good_port:
        ports = {node_address(EVIL): evil_port, node_address(GOOD): good_port}

        async def asker(address: IPv6Address, _port: int) -> dict[str, Any]:
            return await ask.ask(IPv6Address("::1"), ports[address])

        service = NodeService(
            me=lambda: 1,
            port=0,
            info=dict,
            routes=lambda: [route(EVIL), route(GOOD)],
            hub=hub,
            moved=Signal(),
            asker=asker,
        )
        service.watchers_changed()
        async with trio.open_nursery() as nursery:
            await nursery.start(service.run)
            with trio.fail_after(10):
                while not all(n["error"] or n["name"] for n in service.view()):
                    await trio.sleep(0.01)
            shown = {n["node_id"]: n for n in service.view()}
            assert shown[EVIL_ID]["error"] == f"bad node info: {error}"
            assert shown[EVIL_ID]["name"] is None  # nothing of it taken
            assert shown[format_node_id(GOOD)]["name"] == "good"
            service.routes_changed()  # and it still follows routes and publishes
            await trio.sleep(0.3)
            nursery.cancel_scope.cancel()
    hub.flush()
    assert watcher.queued > 0  # the watch client was told of the nodes


async def test_a_push_is_taken_only_as_its_senders_own_checked_and_newer() -> None:
    """`push` over the node info port (nodes/service.py `_take`): bad info is refused with
    `bad node info` and kept as the node's error; a push from another node's address, or
    for a node not routed here, changes nothing; a good one is the node's info at once."""
    service = NodeService(
        me=lambda: 1,
        port=0,
        info=dict,
        routes=lambda: [route(EVIL), route(GOOD)],
        hub=Hub(),
        moved=Signal(),
    )
    service.book.update_routes([route(EVIL), route(GOOD)], trio.current_time())
    run = "ab" * 8

    def pushed(node: int, name: str, serial: int = 1) -> bytes:
        value = {"node_id": format_node_id(node), "name": name, "run": run, "serial": serial}
        return (json.dumps(value) + "\n").encode()

    def names() -> dict[str, str | None]:
        return {n["node_id"]: n["name"] for n in service.view()}

    for data, error in HOSTILE.values():
        reply = service._take(node_address(EVIL), data)
        assert reply == f"bad node info: {error}\n".encode()
    assert names()[EVIL_ID] is None
    # the evil node pushes "good"'s info: from its own address, so not taken
    assert service._take(node_address(EVIL), pushed(GOOD, "forged")).startswith(b"bad push")
    assert names()[format_node_id(GOOD)] is None
    assert service._take(node_address(GOOD), pushed(GOOD, "good", 2)) == b"ok\n"
    assert service._take(node_address(GOOD), pushed(GOOD, "stale", 1)) == b"ok\n"
    assert names()[format_node_id(GOOD)] == "good"
    unrouted = 0x777
    assert service._take(node_address(unrouted), pushed(unrouted, "stranger")) == b"ok\n"
    assert format_node_id(unrouted) not in names()
    assert service.counts["info_pushed"] == len(HOSTILE) + 4
