"""Another node's info answer, checked on arrival (pure): the bytes in, a value of the
documented shape out, or BadInfo saying what is wrong.

Any mesh member (and, without a mesh key, anyone with a cable) answers what it likes, and
the node book, `status.nodes`, the MTU of cables, the IPv4 collision check and every
hostfile are made of these answers. So nothing reads an answer before this module has:
- the size (ANSWER_CAP) and the nesting depth (MAX_DEPTH, by a scan of the bytes) are
  checked before parsing, and the parser refuses integers of more than MAX_DIGITS digits,
  NaN and Infinity (json.loads would take 4,300 digits, 1,000 levels, and both);
- each known field must have its documented type and range (docs/schema/node-info.schema.json):
  a short name, addresses that parse as addresses, interface names Linux or macOS allow,
  `info` a flat map of text, numbers and booleans (what a config's `[info]` allows);
- no text anywhere holds a character a terminal acts on (core/printable.py);
- unknown keys are dropped (later versions add fields; a cluster upgrades one machine at a
  time), and a known key that is missing takes its empty value (older versions lack some).

One bad field refuses the whole answer: the node's previous info stays, and its `error` in
`status.nodes` is `bad node info: <what>`. BadInfo's text never quotes the peer's text
beyond what core/printable.py allows.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from ipaddress import IPv4Address, IPv6Address
from typing import Any

from babbler.core import printable, rdma
from babbler.core.config import MAX_NAME
from babbler.core.cost import MAX_OVERRIDE
from babbler.core.mtu import MAX_MTU
from babbler.core.platform import IFNAMSIZ
from babbler.daemon.nodes.answer import ANSWER_CAP

# A real answer nests 3 deep (answer, list, item); room for fields later versions add, and
# far below the depth at which json's recursion fails.
MAX_DEPTH = 16
# Digits of an integer: 64-bit values fit. Python's int() takes 4,300 and then raises
# ValueError, which once ended babblerd.
MAX_DIGITS = 20
# Characters of a number written with a fraction or exponent (a double needs 25).
MAX_FLOAT_TEXT = 40
# Items of one list: a 16 KiB answer of real entries holds ~250 (neighbours, ~66 bytes each).
MAX_ITEMS = 512
MAX_TEXT = 64  # a version, a link's kind: short words
MAX_UPTIME = 100 * 365 * 86400  # seconds: a century, any machine's uptime
MAX_SERIAL = 2**53  # changes of one node's info in one run: more than any run makes
MAX_SPEED = 10_000_000  # Mb/s: 10 Tb/s, above any link there is
MAX_KEY = 64  # an [info] key, as config.py allows it
MAX_VERSION = 11  # a macOS version: 26.2, 100.100.100
MAX_RDMA_ITEMS = 64  # RDMA devices or Thunderbolt cables of one Mac (a Mac Studio has 6 ports)

Info = dict[str, Any]  # the checked answer: every key of `check`, with its documented type


class BadInfo(ValueError):
    """The answer is not node info; the message says what is wrong, in one line."""


def parse(data: bytes) -> Info:
    """The bytes of one answer, checked. Raises BadInfo."""
    return check(load(data))


def load(data: bytes) -> object:
    """The JSON of one answer (info or counters), before its shape is checked: size,
    UTF-8, depth and number sizes. Raises BadInfo."""
    if len(data) > ANSWER_CAP:
        raise BadInfo(f"longer than {ANSWER_CAP} bytes")
    try:
        text = data.decode()
    except UnicodeDecodeError:
        raise BadInfo("not UTF-8") from None
    if depth(data) > MAX_DEPTH:
        raise BadInfo(f"nested deeper than {MAX_DEPTH}")
    try:
        value = json.loads(
            text, parse_int=_integer, parse_float=_fraction, parse_constant=_constant
        )
    except json.JSONDecodeError as error:
        where = error.msg.removesuffix(" at")  # "Unterminated string starting at"
        raise BadInfo(f"not JSON ({where} at character {error.pos})") from None
    return value


# A string, or one never closed running to the end: without `\Z` an unclosed string made
# the regex start again at every quote (16 KiB of `\"` took 0.76 s on the event loop).
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*(?:"|\Z)', re.DOTALL)
_NOT_BRACKETS = bytes(range(256)).translate(None, b"[]{}")


def depth(data: bytes) -> int:
    """How deep the JSON in `data` nests (brackets inside strings do not count)."""
    deepest = level = 0
    for bracket in _STRING.sub(b'""', data).translate(None, _NOT_BRACKETS):
        level += 1 if bracket in b"[{" else -1
        deepest = max(deepest, level)
    return deepest


def _integer(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_DIGITS:
        raise BadInfo(f"a number of more than {MAX_DIGITS} digits")
    return int(digits)


def _fraction(written: str) -> float:
    number = float(written) if len(written) <= MAX_FLOAT_TEXT else math.inf
    if not math.isfinite(number):
        raise BadInfo("a number out of range")
    return number


def _constant(name: str) -> float:
    raise BadInfo(f"{name} is not a number node info may hold")


def check(value: object) -> Info:
    """A parsed answer in its documented shape (unknown keys dropped). Raises BadInfo."""
    top = _object(value, "the answer")
    out: Info = {
        "node_id": _node_id(top.get("node_id"), "node_id", nullable=False),
        "name": _text(top.get("name"), "name", MAX_NAME),
        "version": _text(top.get("version"), "version", MAX_TEXT),
        "uptime_s": _number(top.get("uptime_s"), "uptime_s", 0, MAX_UPTIME, integer=False),
        "node_address": _address(IPv6Address, top.get("node_address"), "node_address"),
        "interfaces": _items(top.get("interfaces"), "interfaces", _link),
        "neighbours": _items(top.get("neighbours"), "neighbours", _neighbour),
        "info": _info(top.get("info")),
        "node_address_v4": _address(IPv4Address, top.get("node_address_v4"), "node_address_v4"),
        "cables": _items(top.get("cables"), "cables", _cable),
        "rdma": _rdma(top.get("rdma")),
        "run": _run(top.get("run")),
        "serial": _number(top.get("serial"), "serial", 1, MAX_SERIAL),
    }
    if _boolean(top.get("truncated"), "truncated"):
        out["truncated"] = True
    return out


# A link counter: the kernel's are unsigned 64-bit.
MAX_COUNTER = 2**64 - 1
COUNTER_KEYS = ("rx_bytes", "tx_bytes", "rx_packets", "tx_packets")


def parse_counters(data: bytes, node_id: str) -> Info:
    """A `counters` answer of the node `node_id` (the one asked), checked as an info answer
    is: {node_id, at, interfaces: [{name, rx_bytes, tx_bytes, rx_packets, tx_packets}]},
    every counter an integer 0 to 2**64-1, each link once, at most MAX_ITEMS; unknown keys
    dropped. Raises BadInfo."""
    top = _object(load(data), "the answer")
    if _node_id(top.get("node_id"), "node_id", nullable=False) != node_id:
        raise BadInfo("node_id: not the node asked")
    at = _number(top.get("at"), "at", 0, MAX_UPTIME, integer=False)
    if at is None:
        raise BadInfo("at: missing")
    if top.get("interfaces") is None:
        raise BadInfo("interfaces: missing")
    interfaces = _items(top.get("interfaces"), "interfaces", _counted)
    names = [item["name"] for item in interfaces]
    if len(set(names)) != len(names):
        raise BadInfo("interfaces: a link listed twice")
    return {"node_id": node_id, "at": at, "interfaces": interfaces}


def _counted(item: dict[str, Any], at: str) -> Info:
    name = _interface(item.get("name"), f"{at}.name")
    if name is None:
        raise BadInfo(f"{at}.name: missing")
    out: Info = {"name": name}
    for key in COUNTER_KEYS:
        value = _number(item.get(key), f"{at}.{key}", 0, MAX_COUNTER)
        if value is None:
            raise BadInfo(f"{at}.{key}: missing")
        out[key] = value
    return out


def _link(item: dict[str, Any], at: str) -> Info:
    name = _interface(item.get("name"), f"{at}.name")
    if name is None:
        raise BadInfo(f"{at}.name: missing")
    return {
        "name": name,
        "kind": _text(item.get("kind"), f"{at}.kind", MAX_TEXT),
        "speed_mbps": _number(item.get("speed_mbps"), f"{at}.speed_mbps", 0, MAX_SPEED),
        "cost": _number(item.get("cost"), f"{at}.cost", 1, MAX_OVERRIDE),
        "mtu": _number(item.get("mtu"), f"{at}.mtu", 0, MAX_MTU),
        "max_mtu": _number(item.get("max_mtu"), f"{at}.max_mtu", 0, MAX_MTU),
    }


def _neighbour(item: dict[str, Any], at: str) -> Info:
    return {
        "node_id": _node_id(item.get("node_id"), f"{at}.node_id"),
        "interface": _interface(item.get("interface"), f"{at}.interface"),
        "address": _address(IPv6Address, item.get("address"), f"{at}.address"),
    }


def _cable(item: dict[str, Any], at: str) -> Info:
    out = {
        "interface": _interface(item.get("interface"), f"{at}.interface"),
        "address": _address(IPv4Address, item.get("address"), f"{at}.address"),
        "peer": _address(IPv4Address, item.get("peer"), f"{at}.peer"),
    }
    missing = [key for key, value in out.items() if value is None]
    if missing:
        raise BadInfo(f"{at}.{missing[0]}: missing")
    return out


def _rdma(value: object) -> Info | None:
    """RDMA over Thunderbolt readiness (core/rdma.py), null from a Linux node or an older
    version: every field typed and bounded, names as `ibv_devices` and ifconfig give them."""
    if value is None:
        return None
    top = _object(value, "rdma")
    ready = top.get("ready")
    if not isinstance(ready, bool):
        raise BadInfo(f"rdma.ready: expected a boolean, got {_kind(ready)}")
    version = _text(top.get("macos"), "rdma.macos", MAX_VERSION)
    if version is not None and not rdma.VERSION.match(version):
        raise BadInfo("rdma.macos: not a macOS version (26.2)")
    for key in ("devices", "cables"):
        listed = top.get(key)
        if isinstance(listed, list) and len(listed) > MAX_RDMA_ITEMS:
            raise BadInfo(f"rdma.{key}: more than {MAX_RDMA_ITEMS} items")
    devices = top.get("devices")
    if devices is not None and not isinstance(devices, list):
        raise BadInfo(f"rdma.devices: expected a list, got {_kind(devices)}")
    out: Info = {
        "ready": ready,
        "macos": version,
        "rdma_ctl": _text(top.get("rdma_ctl"), "rdma.rdma_ctl", MAX_TEXT),
        "devices": [_device(d, f"rdma.devices[{i}]") for i, d in enumerate(devices or [])],
        "cables": _items(top.get("cables"), "rdma.cables", _rdma_cable),
    }
    # judged here as the doctor judges it (ui/rdma_doctor.py), whatever the peer says: an
    # older or hostile node's ready:true must not get it jaccl from hostfile --backend auto
    out["ready"] = not rdma.problems(out)
    return out


def _rdma_cable(item: dict[str, Any], at: str) -> Info:
    interface = _interface(item.get("interface"), f"{at}.interface")
    if interface is None:
        raise BadInfo(f"{at}.interface: missing")
    generation = _number(item.get("thunderbolt"), f"{at}.thunderbolt", 1, 99)
    device = item.get("device")
    return {
        "interface": interface,
        "speed_gbps": _number(item.get("speed_gbps"), f"{at}.speed_gbps", 0, 10_000, False),
        "thunderbolt": generation,
        "device": None if device is None else _device(device, f"{at}.device"),
    }


def _device(value: object, at: str) -> str:
    if not isinstance(value, str) or not rdma.DEVICE.match(value):
        raise BadInfo(f"{at}: expected an RDMA device name (rdma_en2), got {_kind(value)}")
    return value


def _info(value: object) -> dict[str, str | int | float | bool]:
    """The node's `[info]` table: flat, keys and values as config.py takes them."""
    if value is None:
        return {}
    table = _object(value, "info")
    out: dict[str, str | int | float | bool] = {}
    for key, field in table.items():
        _clean(key, "info: a key")
        if not 1 <= len(key) <= MAX_KEY:
            raise BadInfo(f"info: a key of {len(key)} characters (1 to {MAX_KEY})")
        if isinstance(field, str):
            out[key] = _clean(field, f"info.{key}")
        elif isinstance(field, int | float):  # bool included; NaN and huge numbers refused
            out[key] = field
        else:
            raise BadInfo(f"info.{key}: expected text, a number or a boolean, got {_kind(field)}")
    return out


def _items(value: object, at: str, item: Callable[[dict[str, Any], str], Info]) -> list[Info]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise BadInfo(f"{at}: expected a list, got {_kind(value)}")
    if len(value) > MAX_ITEMS:
        raise BadInfo(f"{at}: more than {MAX_ITEMS} items")
    return [item(_object(entry, f"{at}[{i}]"), f"{at}[{i}]") for i, entry in enumerate(value)]


def _object(value: object, at: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise BadInfo(f"{at}: expected an object, got {_kind(value)}")
    return value


def _clean(text: str, at: str) -> str:
    char = printable.first_unsafe(text)
    if char is not None:
        raise BadInfo(f"{at}: control character {printable.codepoint(char)}")
    return text


def _text(value: object, at: str, longest: int) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not 1 <= len(value) <= longest:
        raise BadInfo(f"{at}: expected text of 1 to {longest} characters, got {_kind(value)}")
    return _clean(value, at)


NODE_ID = re.compile(r"[0-9a-f]{12}")
RUN = re.compile(r"[0-9a-f]{16}")


def _run(value: object) -> str | None:
    """The run of a version (nodes/own.py), or None from a babblerd that does not push."""
    if value is None:
        return None
    if not isinstance(value, str) or not RUN.fullmatch(value):
        raise BadInfo(f"run: expected 16 lowercase hex digits or null, got {_kind(value)}")
    return value


def _node_id(value: object, at: str, nullable: bool = True) -> str | None:
    if value is None and nullable:
        return None
    if not isinstance(value, str) or not NODE_ID.fullmatch(value):
        null = " or null" if nullable else ""
        raise BadInfo(f"{at}: expected 12 lowercase hex digits{null}, got {_kind(value)}")
    return value


def _interface(value: object, at: str) -> str | None:
    """A link name as Linux allows one (dev_valid_name: at most IFNAMSIZ-1 bytes, not `.` or
    `..`, no `/`, `:` or white space), which covers macOS's; printable."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadInfo(f"{at}: expected an interface name, got {_kind(value)}")
    _clean(value, at)
    if (
        not 1 <= len(value.encode()) < IFNAMSIZ
        or value in (".", "..")
        or any(c in "/:" or c.isspace() for c in value)
    ):
        raise BadInfo(f"{at}: not an interface name Linux or macOS allows")
    return value


def _address(kind: type[IPv4Address | IPv6Address], value: object, at: str) -> str | None:
    """An address as text, normalized; no zone (`%eth0`): a zone may hold any text."""
    if value is None:
        return None
    family = "IPv4" if kind is IPv4Address else "IPv6"
    if not isinstance(value, str):
        raise BadInfo(f"{at}: expected an {family} address, got {_kind(value)}")
    if "%" in value:
        raise BadInfo(f"{at}: an address with a zone (%...)")
    try:
        return str(kind(value))
    except ValueError:
        raise BadInfo(f"{at}: not an {family} address") from None


def _number(value: object, at: str, low: float, high: float, integer: bool = True) -> Any:
    """A number in [low, high] (an integer unless `integer` is False), or None; never a
    boolean."""
    if value is None:
        return None
    what = "an integer" if integer else "a number"
    if isinstance(value, bool) or not isinstance(value, int if integer else int | float):
        raise BadInfo(f"{at}: expected {what} or null, got {_kind(value)}")
    if not low <= value <= high:
        raise BadInfo(f"{at}: {value} is out of range ({low:g} to {high:g})")
    return value


def _boolean(value: object, at: str) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise BadInfo(f"{at}: expected a boolean, got {_kind(value)}")
    return value


def _kind(value: object) -> str:
    """What a JSON value is, as the error says it (never the value itself)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return f"text of {len(value)} characters"
    return "a list" if isinstance(value, list) else "an object"
