"""`babblerctl doctor --probe`: the probes themselves (core/probe.py judges what they find).
In order, stopping at the first layer that fails: each cable (a TCP connect bound to this
end's cable address, to the far end's, where its bench responder listens, and 1 MiB
through it), each other node's node address in both families (its node info port), the
route each node address takes (`ip route get` / `route -n get`: the platform's command).
The host's routes and addresses inside the mesh's prefixes are read first (they need no
network) and told at the end, or with the layer that failed: they are its likely cause.

Each probe is bounded (core/probe.py TIMEOUT), and each layer's run at once, so the whole
stays under 30 s on an 8-node mesh."""

from __future__ import annotations

import contextlib
import errno
import json
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from ipaddress import IPv4Network, IPv6Network, ip_interface, ip_network
from typing import Any

from babbler.bench import wire
from babbler.bench.datapath import read_line, send_stream
from babbler.core import darwin_output as darwin
from babbler.core import probe as judge
from babbler.core.cablegraph import CableGraph
from babbler.core.config import DEFAULT_BENCH_PORT, DEFAULT_INFO_PORT
from babbler.core.platform import LINUX, MACOS, Platform
from babbler.core.probe import (
    FAIL,
    TIMEOUT,
    WARN,
    CableProbe,
    HostEntry,
    Line,
    MiB,
    NodeProbe,
    Outcome,
    RouteSeen,
)
from babbler.ctl.doctor import run_command
from babbler.ui.doctor import Check, Facts

Run = Callable[[Sequence[str]], str]  # as ctl/doctor.py's: raises OSError if it cannot run
WORKERS = 16  # probes at once


class _Stop(Exception):
    def __init__(self, outcome: Outcome) -> None:
        self.outcome = outcome


def _connect(address: str, port: int, source: str | None, deadline: float) -> socket.socket:
    sock = socket.socket(socket.AF_INET if "." in address else socket.AF_INET6)
    sock.settimeout(max(0.01, deadline - time.monotonic()))
    try:
        if source is not None:
            try:
                sock.bind((source, 0))
            except OSError as error:
                raise _Stop(Outcome(errno=error.errno, stage="bind")) from None
        try:
            sock.connect((address, port))
        except TimeoutError:
            raise _Stop(Outcome(timed_out=True)) from None
        except OSError as error:
            raise _Stop(Outcome(errno=error.errno)) from None
    except BaseException:
        sock.close()
        raise
    return sock


def _answer(sock: socket.socket) -> dict[str, Any]:
    """The responder's JSON line (hostile: anything but an object is an error)."""
    try:
        got = json.loads(read_line(sock))
    except ValueError:
        got = None
    if not isinstance(got, dict):
        raise _Stop(Outcome(said="an answer that is not the bench protocol", stage="transfer"))
    return got


def _cut(sock: socket.socket, cut: threading.Event) -> None:
    """The deadline: shut the socket, so a recv or send that waits returns at once."""
    cut.set()
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def transfer(near: str, far: str, port: int, timeout: float = TIMEOUT) -> Outcome:
    """Connect from `near` to `far`'s bench responder and send it 1 MiB, within `timeout`:
    a timer shuts the socket at the deadline (a socket timeout bounds each recv, not the
    whole, and a far end dripping a byte at a time would hold it up to MAX_LINE times)."""
    deadline = time.monotonic() + timeout
    try:
        with _connect(far, port, near, deadline) as sock:
            cut = threading.Event()
            timer = threading.Timer(max(0.0, deadline - time.monotonic()), _cut, (sock, cut))
            timer.start()
            try:
                sock.settimeout(max(0.01, deadline - time.monotonic()))
                sock.sendall(wire.Request("send", nbytes=MiB).line())
                said = _answer(sock).get("error")
                if said is not None:
                    return Outcome(said=str(said)[:80], stage="transfer")
                start = time.monotonic()
                send_stream(sock, MiB)
                got = _answer(sock)
                seconds = time.monotonic() - start
            except OSError as error:
                if isinstance(error, TimeoutError) or cut.is_set():
                    return Outcome(timed_out=True, stage="transfer")
                # read_line's ConnectionError on a close has no errno
                return Outcome(errno=error.errno or errno.ECONNRESET, stage="transfer")
            finally:
                timer.cancel()
    except _Stop as stop:
        return stop.outcome
    received = got.get("bytes")
    if type(received) is not int or received != MiB:
        return Outcome(said=f"it received {received!r} bytes of {MiB}", stage="transfer")
    return Outcome(seconds=seconds, nbytes=received)


def reach(address: str, port: int, timeout: float = TIMEOUT) -> Outcome:
    """A bounded connect to `address`, closed at once."""
    start = time.monotonic()
    try:
        with _connect(address, port, None, start + timeout):
            return Outcome(seconds=time.monotonic() - start)
    except _Stop as stop:
        return stop.outcome


# -- the layers ------------------------------------------------------------------------------


def _neighbours(raw: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(interface, far node id) of each neighbour babeld has: each cable."""
    out = []
    for n in raw.get("neighbours") or []:
        if isinstance(n, Mapping) and isinstance(n.get("interface"), str):
            out.append((str(n["interface"]), str(n.get("node_id") or "?")))
    return sorted(set(out))


def cable_probes(raw: Mapping[str, Any], port: int) -> list[CableProbe]:
    graph = CableGraph.from_status(raw)
    ends = {
        str(e.get("interface")): e for e in raw.get("addresses_v4") or [] if isinstance(e, Mapping)
    }
    why = raw.get("ipv4_problem") or ""
    if not why and not raw.get("ipv4_prefix"):
        why = "IPv4 is off (--ipv4-prefix off)"
    todo: list[tuple[str, str, str | None, str | None]] = []
    for interface, far in _neighbours(raw):
        end = ends.get(interface) or {}
        near, peer = end.get("address"), end.get("peer")
        todo.append((interface, graph.label(far), _str(near), _str(peer)))

    def one(item: tuple[str, str, str | None, str | None]) -> CableProbe:
        interface, far, near, peer = item
        if near is None or peer is None:
            missing = why or "none given yet (the far end's node info is older than the cable)"
            return CableProbe(interface, far, near, peer, why_none=missing)
        return CableProbe(interface, far, near, peer, transfer(near, peer, port))

    with ThreadPoolExecutor(WORKERS) as pool:
        return list(pool.map(one, todo))


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _others(raw: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [
        n
        for n in raw.get("nodes") or []
        if isinstance(n, Mapping) and n.get("node_id") != raw.get("node_id")
    ]


def unreachable_lines(raw: Mapping[str, Any]) -> list[Line]:
    """The nodes babblerd knows but has no route to: named, not probed (they would fail as
    "no route to it" and stop the probe, though `babblerctl nodes` already says so)."""
    graph = CableGraph.from_status(raw)
    return [
        (
            f"node {graph.label(str(n.get('node_id')))}",
            WARN,
            "not reachable (no route to it in the mesh): not probed",
            "babblerctl nodes says since when; its cables and its babblerd",
        )
        for n in _others(raw)
        if n.get("reachable") is False
    ]


def node_addresses(raw: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(name, address) of every other reachable node's node addresses, IPv6 then IPv4."""
    graph = CableGraph.from_status(raw)
    out = []
    for node in _others(raw):
        if node.get("reachable") is False:
            continue
        name = graph.label(str(node.get("node_id")))
        for key in ("node_address", "node_address_v4"):
            if isinstance(node.get(key), str):
                out.append((name, str(node[key])))
    return out


def node_probes(raw: Mapping[str, Any], info_port: int, bench_port: int) -> list[NodeProbe]:
    """A connect to each: IPv6 to babblerd's node info, IPv4 to the bench responder (the
    one babblerd serves on IPv4)."""

    def one(item: tuple[str, str]) -> NodeProbe:
        name, address = item
        port = bench_port if "." in address else info_port
        return NodeProbe(name, address, reach(address, port), port)

    with ThreadPoolExecutor(WORKERS) as pool:
        return list(pool.map(one, node_addresses(raw)))


def routes_seen(raw: Mapping[str, Any], run: Run, platform: Platform) -> list[RouteSeen]:
    def one(item: tuple[str, str]) -> RouteSeen:
        name, address = item
        try:
            said = run([*platform.route_get, address])
        except OSError as error:
            return RouteSeen(name, address, None, str(error).splitlines()[0][:120])
        return RouteSeen(name, address, judge.route_device(platform.key, said))

    with ThreadPoolExecutor(WORKERS) as pool:
        return list(pool.map(one, node_addresses(raw)))


# -- the host's routes and addresses ---------------------------------------------------------


def _network(text: str) -> IPv4Network | IPv6Network | None:
    try:
        return ip_network(text, strict=False)
    except ValueError:
        return None


def linux_entries(run: Run) -> list[HostEntry]:
    """Routes (every table; the kernel's local, broadcast and babeld's left out: they are
    addresses, or the mesh's) and addresses, from `ip -json`."""
    out = []
    for family in ("-4", "-6"):
        routes = json.loads(run(["ip", "-json", family, "route", "show", "table", "all"]) or "[]")
        for r in routes:
            if r.get("protocol") == "babel" or r.get("type", "unicast") != "unicast":
                continue
            dst, dev = str(r.get("dst", "")), str(r.get("dev", ""))
            network = _network(dst)
            if network is None or dst == "default":
                continue
            table = f" table {r['table']}" if r.get("table") else ""
            kernel = r.get("protocol") == "kernel"
            out.append(HostEntry(network, dev, f"route {network} dev {dev}{table}", kernel))
    for link in json.loads(run(["ip", "-json", "addr", "show"]) or "[]"):
        for a in link.get("addr_info") or []:
            try:
                iface = ip_interface(f"{a['local']}/{a['prefixlen']}")
            except (KeyError, ValueError):
                continue
            dev = str(link.get("ifname", ""))
            out.append(HostEntry(iface.network, dev, f"address {iface} on {dev}", True))
    return out


def mac_entries(run: Run) -> list[HostEntry]:
    """macOS: `netstat -rn -f inet` as the daemon's clash check reads it, each route with
    its interface (Netif). netstat tells no connected route from another: the mesh's own
    are known from the status (status_own)."""
    text = run(["netstat", "-rn", "-f", "inet"])
    return [HostEntry(r.network, r.device, r.what) for r in darwin.inet_routes(text)]


def status_own(raw: Mapping[str, Any]) -> list[IPv4Network]:
    """The mesh's own IPv4 as the status gives it: the node address (/32) and each cable's
    /31."""
    out = []
    v4 = raw.get("node_address_v4")
    if isinstance(v4, str) and (one := _network(f"{v4}/32")) is not None:
        out.append(one)
    for end in raw.get("addresses_v4") or []:
        address = end.get("address") if isinstance(end, Mapping) else None
        if isinstance(address, str) and (pair := _network(f"{address}/31")) is not None:
            out.append(pair)
    return [n for n in out if isinstance(n, IPv4Network)]


def host_overlaps(raw: Mapping[str, Any], run: Run, platform: Platform) -> list[judge.Overlap]:
    """The host's routes and addresses over the mesh's prefixes that are not the mesh's:
    its own are those on its links and the loopback that the kernel made for them."""
    prefix = _network(str(raw.get("ipv4_prefix") or ""))
    mesh = {str(i.get("name")) for i in raw.get("interfaces") or [] if isinstance(i, Mapping)}
    try:
        entries = linux_entries(run) if platform.key == "linux" else mac_entries(run)
    except (OSError, ValueError):
        return []
    ours: list[IPv4Network | IPv6Network] = [
        e.network for e in entries if e.kernel and (e.device in mesh or e.device == "lo")
    ]
    ours += status_own(raw)
    v4 = prefix if isinstance(prefix, IPv4Network) else None
    return judge.overlaps(v4, entries, ours)


# -- all of it -------------------------------------------------------------------------------


def probe(
    raw: Mapping[str, Any],
    run: Run,
    platform: Platform,
    bench_port: int = DEFAULT_BENCH_PORT,
    info_port: int = DEFAULT_INFO_PORT,
) -> list[Line]:
    """The probe's lines, layer by layer, to the first that fails."""
    found = host_overlaps(raw, run, platform)
    prefix = _network(str(raw.get("ipv4_prefix") or ""))
    overlaps = judge.overlap_lines(found, prefix if isinstance(prefix, IPv4Network) else None)
    cables = {i: f"{i} to {far}" for i, far in _named_neighbours(raw)}
    loopback = "lo" if platform.key == "linux" else "lo0"
    layers: list[tuple[str, Callable[[], list[Line]]]] = [
        ("cables", lambda: judge.cable_lines(cable_probes(raw, bench_port), bench_port)),
        (
            "node addresses",
            lambda: (
                unreachable_lines(raw) + judge.node_lines(node_probes(raw, info_port, bench_port))
            ),
        ),
        ("routes", lambda: judge.route_lines(routes_seen(raw, run, platform), cables, loopback)),
    ]
    out: list[Line] = []
    for index, (name, layer) in enumerate(layers):
        lines = layer()
        out += lines
        if judge.failed(lines):
            out += [o for o in overlaps if o[1] == FAIL]  # the likely cause
            skipped = ", ".join(n for n, _ in layers[index + 1 :]) or "nothing"
            out.append(("probe", WARN, f"stopped at {name}: not probed: {skipped}", ""))
            return out
    return out + overlaps


def _named_neighbours(raw: Mapping[str, Any]) -> list[tuple[str, str]]:
    graph = CableGraph.from_status(raw)
    return [(i, graph.label(far)) for i, far in _neighbours(raw)]


def bounded_run(args: Sequence[str]) -> str:
    """run_command within the probe's bound (core/probe.py TIMEOUT)."""
    return run_command(args, TIMEOUT)


def probe_checks(facts: Facts, run: Run = bounded_run) -> list[Check]:
    """The probe as the doctor's checks; nothing to probe without a running mesh."""
    s = facts.status
    if s is None or s.mesh != "running":
        saw = "babblerd does not answer" if s is None else f"the mesh is {s.mesh}"
        return [Check("probe", FAIL, f"not probed: {saw}", "the checks above say why")]
    platform = MACOS if facts.platform == MACOS.name else LINUX
    return [Check(*line) for line in probe(s.raw, run, platform)]
