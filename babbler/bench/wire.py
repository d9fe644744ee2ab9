"""The bench protocol's requests and limits (pure; docs/bench.md "Protocol").

A client connects to a node's responder (TCP, its node address, port 6699), sends one JSON
line, and gets one JSON line: `{"ok": true}` and the test follows, or `{"error": "..."}`
and the connection closes. Tests:

- `rtt`: `size` bytes to and fro, `count` times (the client sends, the responder echoes).
- `send`: the client sends `bytes` bytes (or for as long as it likes, `bytes` 0: until it
  shuts its side down); the responder answers `{"bytes": n, "seconds": t}`, t from the first
  byte to the last, as the receiver saw them.
- `recv`: the responder sends `bytes` bytes, or for `seconds`, then closes.
- `ring`: the responder itself runs a `send` of `seconds` to the node at `to`, tagged with
  `token` (which lets it in while that responder is busy with its own ring session), and
  answers that receiver's `{"bytes", "seconds"}`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from ipaddress import IPv4Network, IPv6Address, ip_address
from typing import Any

from babbler.core.addressing import MESH_PREFIX
from babbler.core.config import DEFAULT_BENCH_PORT

DEFAULT_PORT = DEFAULT_BENCH_PORT
MAX_SESSION = 60.0  # seconds: a session is ended after this, whatever it asked
MAX_LINE = 512  # a request line
REQUEST_TIMEOUT = 2.0  # seconds for the request line
MAX_RTT_SIZE = 65536
MAX_COUNT = 1_000_000
MAX_BYTES = 1 << 36  # 64 GiB: more than MAX_SESSION of any link there is
CHUNK = 1 << 20  # bytes per send/recv on the data path: measured, docs/bench.md
TESTS = ("rtt", "send", "recv", "ring")
KiB = 1024
# The size sweep: 1 KiB to 1 GiB, a factor of 4 apart, as exo's MLX bandwidth bench
# (test_mlx_bandwidth.py in exo's bench folder; it goes on to 8 GiB).
SWEEP = tuple(KiB * 4**i for i in range(11))


class BadBenchRequest(ValueError):
    """A request the responder refuses; the message goes back to the client."""


@dataclass(frozen=True)
class Request:
    test: str
    size: int = 0  # rtt: bytes each way
    count: int = 0  # rtt: round trips
    nbytes: int = 0  # send/recv: how many (0: for `seconds`, or until the sender stops)
    seconds: float = 0.0  # recv/ring: how long
    to: str | None = None  # ring: the next node's address
    token: str | None = None  # ring: the session's tag, on the ring's own sends

    def line(self) -> bytes:
        fields = {k: v for k, v in self.__dict__.items() if v not in (0, 0.0, None)}
        if "nbytes" in fields:
            fields["bytes"] = fields.pop("nbytes")
        return (json.dumps({**fields, "test": self.test}) + "\n").encode()


def _int(obj: dict[str, Any], key: str, low: int, high: int) -> int:
    value = obj.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise BadBenchRequest(f"{key} must be an integer from {low} to {high}")
    return value


def mesh_source(address: str, ipv4_prefix: IPv4Network | None = None) -> bool:
    """Whether an address is of the mesh: the IPv6 /48, or the IPv4 prefix when given."""
    try:
        parsed = ip_address(address.split("%")[0])
    except ValueError:
        return False
    if isinstance(parsed, IPv6Address):
        return parsed in MESH_PREFIX
    return ipv4_prefix is not None and parsed in ipv4_prefix


def parse(line: bytes, ipv4_prefix: IPv4Network | None = None) -> Request:
    """A request from its line. Raises BadBenchRequest with the reason."""
    try:
        obj = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        raise BadBenchRequest("not a JSON line") from None
    if not isinstance(obj, dict):
        raise BadBenchRequest("not a JSON object")
    test = obj.get("test")
    if test not in TESTS:
        raise BadBenchRequest(f"test must be one of {', '.join(TESTS)}")
    seconds = obj.get("seconds", 0)
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise BadBenchRequest("seconds must be a number")
    if not 0 <= seconds <= MAX_SESSION:
        raise BadBenchRequest(f"seconds must be from 0 to {MAX_SESSION:g}")
    token = obj.get("token")
    if token is not None and (not isinstance(token, str) or len(token) > 64):
        raise BadBenchRequest("token must be a short string")
    request = Request(
        test,
        size=_int(obj, "size", 0, MAX_RTT_SIZE),
        count=_int(obj, "count", 0, MAX_COUNT),
        nbytes=_int(obj, "bytes", 0, MAX_BYTES),
        seconds=float(seconds),
        to=obj.get("to") if isinstance(obj.get("to"), str) else None,
        token=token,
    )
    if test == "rtt" and not (request.size and request.count):
        raise BadBenchRequest("rtt needs size and count")
    if test == "recv" and not (request.nbytes or request.seconds):
        raise BadBenchRequest("recv needs bytes or seconds")
    if test == "ring":
        if not (request.to and request.seconds and request.token):
            raise BadBenchRequest("ring needs to, seconds and token")
        if not mesh_source(request.to, ipv4_prefix):
            raise BadBenchRequest("ring's to must be a mesh address")
    return request


def answer(**fields: Any) -> bytes:
    return (json.dumps(fields) + "\n").encode()


def percentile(values: Sequence[float], p: float) -> float:
    """The p-th percentile (0-100) by nearest rank, ceil(p/100 * n); values need not be
    sorted. (The benchmarks use it too: bench/common.py.)"""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(p / 100 * len(ordered))))
    return ordered[rank - 1]


@dataclass(frozen=True)
class Rate:
    nbytes: int
    seconds: float

    @property
    def gbit_s(self) -> float:
        return self.nbytes * 8 / self.seconds / 1e9 if self.seconds > 0 else 0.0

    @property
    def gbyte_s(self) -> float:
        return self.nbytes / self.seconds / 1e9 if self.seconds > 0 else 0.0
