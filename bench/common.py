"""Shared by the benchmarks: statistics, the printed table, the JSON file, the machine."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import selectors
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
sys.path.insert(0, str(ROOT))  # `python bench/x.py` from anywhere: babbler and tests.fakes

from babbler.bench.wire import percentile  # noqa: E402 (after the path above)


def summary(values: Sequence[float]) -> dict[str, float | int]:
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "min": min(values),
        "p50": statistics.median(values),
        "p90": percentile(values, 90),
        "p99": percentile(values, 99),
        "max": max(values),
        "mean": statistics.fmean(values),
    }


def machine() -> dict[str, Any]:
    babeld = subprocess.run(["babeld", "-V"], capture_output=True, text=True, check=False)
    return {
        "host": platform.node(),
        "kernel": platform.release(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "babeld": (babeld.stderr or babeld.stdout).strip(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def table(title: str, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[str(h) for h in header]] + [[fmt(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = [title, ""]
    for n, row in enumerate(cells):
        lines.append(
            "  ".join(
                c.rjust(w) if n and i else c.ljust(w)
                for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
        )
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 100 else f"{value:.0f}"
    return str(value)


def write(name: str, data: dict[str, Any], out: Path | None) -> Path:
    path = out or RESULTS / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"benchmark": name, "machine": machine(), **data}, indent=2) + "\n")
    return path


def need_root() -> None:
    if os.geteuid() != 0:
        sys.exit("benchmarks need root: they create network namespaces and run babeld")


TICKS = os.sysconf("SC_CLK_TCK")


def counters(pid: int) -> tuple[int, float]:
    """(context switches of every thread, CPU seconds) of a process so far."""
    switches = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        for line in Path(f"/proc/{pid}/task/{task}/status").read_text().splitlines():
            if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                switches += int(line.split()[1])
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    cpu = (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime
    return switches, cpu


def rate(pid: int, seconds: float) -> dict[str, float]:
    s0, c0 = counters(pid)
    time.sleep(seconds)
    s1, c1 = counters(pid)
    return {"wakeups_per_s": (s1 - s0) / seconds, "cpu_percent": 100 * (c1 - c0) / seconds}


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def cpu_percent(pids: list[int], window: float) -> list[float]:
    """Each process's CPU use over the same window, in % of one core."""
    before = {pid: counters(pid)[1] for pid in pids}
    started = time.monotonic()
    time.sleep(window)
    took = time.monotonic() - started
    return [100 * (counters(pid)[1] - before[pid]) / took for pid in pids]


class Subscribers:
    """Connections to Unix sockets that each sent one request (`watch` to babblerd,
    `monitor` to babeld) and are drained by one thread, so that none falls behind; counts
    the bytes and lines that came."""

    def __init__(self, paths: Sequence[Path], request: bytes) -> None:
        self._selector = selectors.DefaultSelector()
        self._socks: list[socket.socket] = []
        for path in paths:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(str(path))
            sock.sendall(request)
            sock.setblocking(False)
            self._selector.register(sock, selectors.EVENT_READ)
            self._socks.append(sock)
        self.received = 0  # bytes
        self.lines = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        while not self._stop.is_set():
            for key, _ in self._selector.select(0.1):
                with contextlib.suppress(BlockingIOError):
                    data = key.fileobj.recv(1 << 20)  # type: ignore[union-attr]
                    self.received += len(data)
                    self.lines += data.count(b"\n")

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        for sock in self._socks:
            sock.close()
        self._selector.close()
