"""`babblerctl bench` results for people (tables), programs (JSON) and a picture (SVG
throughput against message size) (pure)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from html import escape
from typing import Any

from babbler.bench.wire import Rate, percentile


@dataclass
class NodeResult:
    """One node's bench: who, and what was measured (None: not measured)."""

    name: str
    node_id: str
    address: str
    hops: int | None
    rtts: list[float] = field(default_factory=list)  # seconds per round trip
    sent: Rate | None = None  # this node to it
    received: Rate | None = None  # it to this node
    sweep: list[tuple[int, float]] = field(default_factory=list)  # (size, seconds)
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "node_id": self.node_id,
            "address": self.address,
            "node_address": self.address,  # status's name for it (`address` stays)
            "hops": self.hops,
            "error": self.error,
        }
        if self.rtts:
            out["rtt_ms"] = {
                "p50": percentile(self.rtts, 50) * 1000,
                "p99": percentile(self.rtts, 99) * 1000,
                "count": len(self.rtts),
            }
            out["rtt"] = out["rtt_ms"]  # milliseconds, as status's `rtt` (`rtt_ms` stays)
        for key, rate in (("send", self.sent), ("receive", self.received)):
            if rate is not None:
                out[key] = {"bytes": rate.nbytes, "seconds": rate.seconds, "gbit_s": rate.gbit_s}
        if self.sweep:
            out["sweep"] = [
                {
                    "bytes": size,
                    "seconds": seconds,
                    "gbyte_s": size / seconds / 1e9,
                    "gbit_s": size * 8 / seconds / 1e9,
                }
                for size, seconds in self.sweep
            ]
        return out


def size_text(size: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:g} {unit}"
    return f"{size} B"


def time_text(seconds: float) -> str:
    return f"{seconds * 1000:.3f} ms" if seconds < 1 else f"{seconds:.3f} s"


def _rate(rate: Rate | None) -> str:
    return "-" if rate is None else f"{rate.gbit_s:.2f}"


def _ms(result: NodeResult, p: float) -> str:
    return f"{percentile(result.rtts, p) * 1000:.3f}" if result.rtts else "-"


def one(me: str, result: NodeResult) -> list[str]:
    """A single node's bench, as the original's tables."""
    hops = "" if result.hops is None else f", {result.hops} hop{'s' * (result.hops != 1)}"
    lines = [f"bench {me} -> {result.name} ({result.address}{hops})"]
    if result.error:
        return [*lines, f"  failed: {result.error}"]
    if result.rtts:
        lines.append(
            f"  rtt      p50 {_ms(result, 50)} ms  p99 {_ms(result, 99)} ms  "
            f"({len(result.rtts)} round trips of 64 bytes)"
        )
    if result.sent is not None:
        lines.append(f"  send     {_rate(result.sent)} Gbit/s  ({me} -> {result.name})")
    if result.received is not None:
        lines.append(f"  receive  {_rate(result.received)} Gbit/s  ({result.name} -> {me})")
    if result.sweep:
        lines += ["", f"  {'SIZE':<10}  {'TIME':>12}  {'Gbit/s':>8}"]
        for size, seconds in result.sweep:
            rate = size * 8 / seconds / 1e9  # the unit of send and receive above
            lines.append(f"  {size_text(size):<10}  {time_text(seconds):>12}  {rate:>8.3f}")
    return lines


def every(me: str, results: list[NodeResult]) -> list[str]:
    """`--all`: a line per node."""
    rows = [["NODE", "HOPS", "RTT P50 ms", "RTT P99 ms", "SEND Gbit/s", "RECEIVE Gbit/s"]]
    for r in results:
        if r.error:
            rows.append([r.name, str(r.hops if r.hops is not None else "-"), f"failed: {r.error}"])
            continue
        hops = "-" if r.hops is None else str(r.hops)
        rows.append([r.name, hops, _ms(r, 50), _ms(r, 99), _rate(r.sent), _rate(r.received)])
    widths = [max(len(row[i]) for row in rows if i < len(row)) for i in range(len(rows[0]))]
    lines = [f"bench from {me}, every reachable node in turn"]
    for row in rows:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row)]
        lines.append("  " + "  ".join(cells).rstrip())
    slow = behind_slow_links(results)
    if slow:
        lines.append(f"  behind a slower link (under half the best rate): {', '.join(slow)}")
    return lines


def behind_slow_links(results: list[NodeResult]) -> list[str]:
    """The nodes whose slower direction is under half the best node's: those a slower
    link (or a loaded hop) stands between."""
    rates = {
        r.name: min(r.sent.gbit_s, r.received.gbit_s)
        for r in results
        if r.sent is not None and r.received is not None
    }
    best = max(rates.values(), default=0.0)
    return [name for name, rate in rates.items() if rate < best / 2]


def ring(names: list[str], results: list[Rate | str], seconds: float) -> list[str]:
    """`--ring`: every node sending to the next at once."""
    lines = [f"ring: every node sends to the next at once for {seconds:g} s"]
    width = max(len(n) for n in names)
    for i, result in enumerate(results):
        to = names[(i + 1) % len(names)]
        what = f"{result.gbit_s:.2f} Gbit/s" if isinstance(result, Rate) else f"failed: {result}"
        lines.append(f"  {names[i]:<{width}} -> {to:<{width}}  {what}")
    rates = [r.gbit_s for r in results if isinstance(r, Rate)]
    if rates:
        lines.append(f"  slowest {min(rates):.2f} Gbit/s, sum {sum(rates):.2f} Gbit/s")
    return lines


def svg(me: str, results: list[NodeResult]) -> str:
    """Throughput (Gbit/s) against message size (log scale), a line per node."""
    series = [(r.name, r.sweep) for r in results if r.sweep]
    width, height, left, bottom, top, right = 640, 400, 60, 50, 30, 120
    sizes = sorted({size for _, rows in series for size, _ in rows}) or [1024, 1 << 30]
    peak = max((s * 8 / t / 1e9 for _, rows in series for s, t in rows), default=1.0)
    top_value = max(0.001, peak * 1.1)
    low, high = math.log2(sizes[0]), math.log2(sizes[-1]) or 1.0

    def x(size: int) -> float:
        span = (high - low) or 1.0
        return left + (math.log2(size) - low) / span * (width - left - right)

    def y(value: float) -> float:
        return height - bottom - value / top_value * (height - bottom - top)

    colours = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf"]
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif" font-size="11">',
        f'<text x="{left}" y="18" font-size="13">babblerctl bench from {escape(me)}: '
        "throughput against message size</text>",
        f'<line x1="{left}" y1="{height - bottom}" x2="{width - right}" y2="{height - bottom}" '
        'stroke="black"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{height - bottom}" stroke="black"/>',
    ]
    for size in sizes[:: max(1, len(sizes) // 6)]:
        out.append(
            f'<text x="{x(size):.1f}" y="{height - bottom + 15}" text-anchor="middle">'
            f"{size_text(size)}</text>"
        )
    for i in range(5):
        value = top_value * i / 4
        out.append(
            f'<text x="{left - 6}" y="{y(value) + 4:.1f}" text-anchor="end">{value:.2f}</text>'
        )
    out.append(
        f'<text x="14" y="{(height - bottom + top) / 2:.0f}" transform="rotate(-90 14 '
        f'{(height - bottom + top) / 2:.0f})" text-anchor="middle">Gbit/s</text>'
    )
    for n, (name, rows) in enumerate(series):
        colour = colours[n % len(colours)]
        points = " ".join(f"{x(s):.1f},{y(s * 8 / t / 1e9):.1f}" for s, t in rows)
        out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{points}"/>')
        label_y = top + 16 * n + 10
        out.append(
            f'<text x="{width - right + 10}" y="{label_y}" fill="{colour}">{escape(name)}</text>'
        )
    out.append("</svg>")
    return "\n".join(out) + "\n"
