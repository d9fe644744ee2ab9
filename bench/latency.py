"""Event latency: from babeld writing a line on its control socket to a client receiving it.

1. The chatter rate: monitor lines per second that a real 10-node ring produces on one node
   at babbler's default hello interval (real babeld, counted through babblerd).
2. A babblerd whose babeld is the fake of tests/fakes, emitting that many lines per second,
   each a real change stamped with a sequence number (the fake logs when it wrote each).
3. Readers, side by side on the same stream:
     direct        one client of babeld's own socket (`monitor`): the limit
     polling-5s    the original design: `dump` every 5 s on babeld's socket
     monitor xN    N clients of babblerd's `monitor` (N = 1, 100, 1000)
     watch xN      N clients of babblerd's `watch`
   Latency is measured on up to SAMPLED clients of each phase; every client is checked for
   starvation (it must have the last line sent before the phase ended).

    sudo .venv/bin/python bench/latency.py [--seconds 15] [--quick] [--out FILE]
"""

from __future__ import annotations

import argparse
import bisect
import multiprocessing
import os
import re
import selectors
import socket
import sys
import time
from pathlib import Path
from typing import Any

import common

from babbler.lab import Lab

SAMPLED = 10
GROUPS = 2  # reader processes for the unsampled clients (this machine has 2 cores)
# The stamp: babeld's lines carry "rtt 1.230", watch's JSON a float ("rtt":1.23, trailing
# zeros dropped), so one to three decimals.
RTT = re.compile(rb'rtt(?:":| )([0-9]+)\.([0-9]{1,3})')


def stamp(whole: bytes, decimals: bytes) -> int:
    """The sequence number a stamped rtt carries (rtt = seq / 1000)."""
    return int(whole) * 1000 + int(decimals.ljust(3, b"0"))


FAKE = common.ROOT / "tests" / "fakes" / "fake_babeld.py"


def chatter_rate(seconds: float) -> dict[str, float]:
    """Monitor lines per second on n1 of a converged 10-node ring (real babeld)."""
    lab = Lab.create(f"bl{os.getpid() % 10000}", 10, "ring", ["--mode", "always"])
    try:
        lab.start_all()
        lab.wait_reachable(120)
        time.sleep(2)
        sock = _connect(str(lab.nodes[0].socket), b"monitor\n")
        sock.setblocking(True)
        data = b"\n"  # so that an empty table's bare "ok" ends it too
        while b"\nok\n" not in data:  # the table first: counted from its end
            data += sock.recv(1 << 16)
        count = data.partition(b"\nok\n")[2].count(b"\n")
        started = time.monotonic()
        while (left := seconds - (time.monotonic() - started)) > 0:
            sock.settimeout(left)
            try:
                count += sock.recv(1 << 16).count(b"\n")
            except TimeoutError:
                break
        sock.close()
        return {"lines_per_second": count / seconds, "seconds": seconds}
    finally:
        lab.down()


# -- readers (run in child processes; plain sockets and selectors, as light as Python gets) --


def _connect(path: str, request: bytes) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    data = b""
    while not data.endswith(b"ok\n"):
        chunk = sock.recv(4096)
        if not chunk:
            raise ConnectionError(f"closed during the header: {data!r}")
        data += chunk
    sock.sendall(request)
    sock.setblocking(False)
    return sock


def read_group(
    path: str, request: bytes, count: int, sampled: bool, until: float, out: Any
) -> None:
    """Follow `count` connections until `until` (monotonic). Sampled: every (seq, recv ns);
    otherwise only the last seq each connection saw."""
    socks = [_connect(path, request) for _ in range(count)]
    selector = selectors.DefaultSelector()
    tails = {}
    last = {}
    seen: dict[int, list[tuple[int, int]]] = {}
    for n, sock in enumerate(socks):
        selector.register(sock, selectors.EVENT_READ, n)
        tails[n], last[n], seen[n] = b"", 0, []
    cut_off = 0
    while time.monotonic() < until:
        for key, _ in selector.select(0.2):
            n = key.data
            try:
                chunk = key.fileobj.recv(1 << 16)  # type: ignore[union-attr]
            except BlockingIOError:
                continue
            now = time.monotonic_ns()
            if not chunk:
                selector.unregister(key.fileobj)
                cut_off += 1
                continue
            data = tails[n] + chunk
            cut = data.rfind(b"\n") + 1
            tails[n] = data[cut:]
            complete = data[:cut]
            if sampled:
                seen[n].extend((stamp(a, b), now) for a, b in RTT.findall(complete))
            else:
                found = RTT.findall(complete[-400:])
                if found:
                    a, b = found[-1]
                    last[n] = stamp(a, b)
    if sampled:
        for n in seen:
            last[n] = max((s for s, _ in seen[n]), default=0)
    out.put({"sampled": sampled, "seen": seen if sampled else {}, "last": last, "cut_off": cut_off})
    for sock in socks:
        sock.close()


def poll_dump(path: str, every: float, until: float, out: Any) -> None:
    """The original design: `dump` on babeld's socket every `every` seconds."""
    sock = _connect(path, b"")
    sock.settimeout(5)
    seen = []
    while time.monotonic() + every < until:
        time.sleep(every)
        sock.sendall(b"dump\n")
        data = b""
        while not data.endswith(b"ok\n"):
            data += sock.recv(1 << 16)
        now = time.monotonic_ns()
        for a, b in RTT.findall(data):
            seen.append((stamp(a, b), now))
    sock.close()
    out.put({"sampled": True, "seen": {0: seen}, "last": {0: 0}, "cut_off": 0, "poll": True})


# -- one phase -------------------------------------------------------------------------------


def stamps(path: Path) -> dict[int, int]:
    out = {}
    for line in path.read_text().splitlines():
        seq, ns = line.split()
        out[int(seq)] = int(ns)
    return out


def phase(
    name: str, target: str, request: bytes, clients: int, seconds: float, stamp: Path
) -> dict[str, Any]:
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    start = time.monotonic() + 1.0 + clients / 500  # connecting 1,000 takes a moment
    until = start + seconds
    procs = []
    if name == "polling-5s":
        procs.append(ctx.Process(target=poll_dump, args=(target, 5.0, until, out)))
    else:
        sampled = min(SAMPLED, clients)
        procs.append(
            ctx.Process(target=read_group, args=(target, request, sampled, True, until, out))
        )
        rest = clients - sampled
        for g in range(GROUPS):
            share = rest // GROUPS + (1 if g < rest % GROUPS else 0)
            if share:
                procs.append(
                    ctx.Process(target=read_group, args=(target, request, share, False, until, out))
                )
    for proc in procs:
        proc.start()
    results = [out.get(timeout=seconds + 120) for _ in procs]
    for proc in procs:
        proc.join()
    sent = stamps(stamp)
    window = [s for s, ns in sent.items() if start * 1e9 <= ns <= (until - 1.0) * 1e9]
    latencies: list[float] = []
    missing = 0
    for result in results:
        if not result["sampled"]:
            continue
        for pairs in result["seen"].values():
            got: dict[int, int] = {}
            for seq, ns in pairs:
                got.setdefault(seq, ns)
            if result.get("poll") or request == b"watch\n":
                # State, not a log: a poll shows only the newest value, and `watch` sends one
                # event for changes that arrive together. A line counts as delivered by the
                # first answer that shows it or anything newer.
                first_from: dict[int, int] = {}
                soonest = None
                for seq, ns in sorted(pairs, reverse=True):
                    soonest = ns if soonest is None else min(soonest, ns)
                    first_from[seq] = soonest
                shown = sorted(first_from)
                for seq in window:
                    at = bisect.bisect_left(shown, seq)
                    if at < len(shown):
                        latencies.append((first_from[shown[at]] - sent[seq]) / 1e6)
                    else:
                        missing += 1
                continue
            for seq in window:
                if seq in got:
                    latencies.append((got[seq] - sent[seq]) / 1e6)
                else:
                    missing += 1
    newest = max(window) if window else 0
    starved = sum(
        1 for r in results if not r.get("poll") for last in r["last"].values() if last < newest
    )
    cut_off = sum(r["cut_off"] for r in results)
    return {
        "clients": clients,
        "lines": len(window),
        "latency_ms": common.summary(latencies),
        "missing_on_sampled": missing,
        "starved_clients": starved,
        "cut_off_clients": cut_off,
    }


def run(rate: float, seconds: float, counts: list[int], only: list[str] | None) -> dict[str, Any]:
    lab = Lab.create(f"bk{os.getpid() % 10000}", 2, "line", [])
    base = Path(lab.base)
    stamp = base / "stamps"
    wrapper = base / "fake-babeld"
    base.mkdir(parents=True, exist_ok=True)
    wrapper.write_text(
        "#!/bin/sh\n"
        f"export FAKE_BABELD_CHATTER={1 / rate:.6f},1 FAKE_BABELD_STAMP={stamp}\n"
        f'exec {sys.executable} {FAKE} "$@"\n'
    )
    wrapper.chmod(0o755)
    lab.daemon_args = ["--mode", "always", "--babeld", str(wrapper)]
    node = lab.nodes[0]
    phases: dict[str, Any] = {}
    try:
        lab.start(node)
        private = str(node.run_dir / "private" / "babeld.sock")
        public = str(node.socket)
        time.sleep(1)
        plan = [("direct", private, b"monitor\n", 1), ("polling-5s", private, b"", 1)]
        plan += [(f"monitor x{n}", public, b"monitor\n", n) for n in counts]
        plan += [(f"watch x{n}", public, b"watch\n", n) for n in counts]
        for name, target, request, clients in plan:
            if only and name not in only:
                continue
            phases[name] = phase(name, target, request, clients, seconds, stamp)
            summary = phases[name]["latency_ms"]
            print(
                f"  {name:13} p50 {summary.get('p50', float('nan')):8.2f} ms  "
                f"p99 {summary.get('p99', float('nan')):8.2f} ms  "
                f"starved {phases[name]['starved_clients']}",
                flush=True,
            )
        phases["daemon_restarts"] = lab.status(node)["babeld"]["restarts"]
    finally:
        lab.down()
    return phases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=15.0, help="per phase")
    parser.add_argument("--quick", action="store_true", help="short phases, 1 and 10 clients")
    parser.add_argument("--rate", type=float, help="lines/s (default: measured on a 10-ring)")
    parser.add_argument("--only", nargs="+", metavar="READER", help='e.g. "watch x100"')
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    common.need_root()
    seconds = 7.0 if args.quick else args.seconds  # a poll every 5 s needs more than 5
    counts = [1, 10] if args.quick else [1, 100, 1000]
    if args.rate:
        rate = {"lines_per_second": args.rate, "seconds": 0.0}
    elif args.quick:
        rate = {"lines_per_second": 84.0, "seconds": 0.0}
    else:
        rate = chatter_rate(10.0)
    print(f"chatter: {rate['lines_per_second']:.1f} lines/s", flush=True)
    phases = run(rate["lines_per_second"], seconds, counts, args.only)
    rows = []
    for name, r in phases.items():
        if not isinstance(r, dict):
            continue
        s = r["latency_ms"]
        rows.append(
            [
                name,
                r["clients"],
                s.get("p50", "-"),
                s.get("p90", "-"),
                s.get("p99", "-"),
                s.get("max", "-"),
                r["starved_clients"],
            ]
        )
    print()
    print(
        common.table(
            "event latency (ms)", ["reader", "clients", "p50", "p90", "p99", "max", "starved"], rows
        )
    )
    path = common.write(
        "latency", {"chatter": rate, "seconds_per_phase": seconds, "phases": phases}, args.out
    )
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
