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
    """A single node's bench: round trips, each way, and the sweep as exo's MLX bandwidth
    bench tables it (size, time, rate; in Gbit/s here)."""
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


@dataclass(frozen=True)
class RingLink:
    """One sender of the ring and what its receiver counted (None: it failed, `error`)."""

    sender: str
    receiver: str
    rate: Rate | None
    error: str | None = None


def ring_links(names: list[str], results: list[Rate | str]) -> list[RingLink]:
    """Each node sending to the next, the last to the first."""
    return [
        RingLink(
            names[i],
            names[(i + 1) % len(names)],
            *((result, None) if isinstance(result, Rate) else (None, result)),
        )
        for i, result in enumerate(results)
    ]


def ring_summary(links: list[RingLink]) -> tuple[RingLink, float] | None:
    """The ring's slowest link (what an all-gather over it runs at) and the sum of the
    rates, of the links measured; None when none was."""
    measured = [link for link in links if link.rate is not None]
    if not measured:
        return None
    slowest = min(measured, key=lambda link: link.rate.gbit_s if link.rate else 0.0)
    return slowest, sum(link.rate.gbit_s for link in measured if link.rate)


def ring(names: list[str], results: list[Rate | str], seconds: float) -> list[str]:
    """`--ring`: every node sending to the next at once."""
    lines = [f"ring: every node sends to the next at once for {seconds:g} s"]
    width = max(len(n) for n in names)
    links = ring_links(names, results)
    for link in links:
        what = f"{link.rate.gbit_s:.2f} Gbit/s" if link.rate else f"failed: {link.error}"
        lines.append(f"  {link.sender:<{width}} -> {link.receiver:<{width}}  {what}")
    summary = ring_summary(links)
    if summary is not None:
        slowest, total = summary
        lines.append(
            f"  slowest {_gbit(slowest)} Gbit/s ({slowest.sender} -> {slowest.receiver}),"
            f" sum {total:.2f} Gbit/s"
        )
    return lines


def _gbit(link: RingLink) -> str:
    return f"{link.rate.gbit_s:.2f}" if link.rate else "-"


def ring_json(me: str, names: list[str], results: list[Rate | str]) -> dict[str, Any]:
    """`--ring --json`: each link, and the slowest and the sum as the table says them."""
    links = ring_links(names, results)
    out: list[dict[str, Any]] = []
    for link in links:
        entry: dict[str, Any] = {"from": link.sender, "to": link.receiver}
        if link.rate is not None:
            entry |= {
                "bytes": link.rate.nbytes,
                "seconds": link.rate.seconds,
                "gbit_s": link.rate.gbit_s,
            }
        else:
            entry["error"] = link.error
        out.append(entry)
    summary = ring_summary(links)
    slowest = None
    if summary is not None and summary[0].rate is not None:
        link, rate = summary[0], summary[0].rate
        slowest = {"from": link.sender, "to": link.receiver, "gbit_s": rate.gbit_s}
    return {
        "from": me,
        "ring": out,
        "slowest": slowest,  # null when no link was measured
        "sum_gbit_s": summary[1] if summary else None,
    }


def ticks(peak: float) -> list[float]:
    """Round values for an axis from 0 to at least `peak`: a step of 1, 2 or 5 times a
    power of ten, at most 6 steps (0, 5, 10, 15 rather than 0, 4.98, 9.95)."""
    peak = max(peak, 1e-3)
    for step in _steps(peak / 6):
        count = math.ceil(peak / step - 1e-9)
        if count <= 6:
            return [round(step * i, 10) for i in range(count + 1)]
    return [0.0, peak]  # not reached: the steps grow past peak


def _steps(smallest: float) -> list[float]:
    power = 10.0 ** math.floor(math.log10(smallest))
    return [m * power * 10**k for k in range(3) for m in (1, 2, 5) if m * power * 10**k >= smallest]


def tick_text(value: float) -> str:
    return f"{value:g}"


def svg(me: str, results: list[NodeResult]) -> str:
    """Throughput (Gbit/s) against message size (log scale), a line per node."""
    series = [(r.name, r.sweep) for r in results if r.sweep]
    width, height, left, bottom, top, right = 640, 400, 60, 50, 30, 120
    sizes = sorted({size for _, rows in series for size, _ in rows}) or [1024, 1 << 30]
    peak = max((s * 8 / t / 1e9 for _, rows in series for s, t in rows), default=1.0)
    marks = ticks(peak)
    top_value = marks[-1]
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
    for value in marks:
        out.append(
            f'<text x="{left - 6}" y="{y(value) + 4:.1f}" text-anchor="end">'
            f"{tick_text(value)}</text>"
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


def ring_svg(me: str, names: list[str], results: list[Rate | str], seconds: float) -> str:
    """`--ring --svg`: a bar per link of the ring (Gbit/s, its receiver's count), the slowest
    in red, the slowest and the sum in the title; a failed link says why."""
    links = ring_links(names, results)
    summary = ring_summary(links)
    marks = ticks(max((link.rate.gbit_s for link in links if link.rate), default=1.0))
    left, right, top, row = 160, 40, 60, 26
    width, height = 640, top + row * len(links) + 40

    def x(value: float) -> float:
        return left + value / marks[-1] * (width - left - right)

    title = (
        f"babblerctl bench --ring from {escape(me)}: every node sends to the next for {seconds:g} s"
    )
    said = "no link measured"
    if summary is not None:
        slowest, total = summary
        said = (
            f"slowest {_gbit(slowest)} Gbit/s ({escape(slowest.sender)} -&gt; "
            f"{escape(slowest.receiver)}), sum {total:.2f} Gbit/s"
        )
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif" font-size="11">',
        f'<text x="10" y="18" font-size="13">{title}</text>',
        f'<text x="10" y="36" font-size="12">{said}</text>',
    ]
    bottom = top + row * len(links)
    for value in marks:
        out.append(
            f'<line x1="{x(value):.1f}" y1="{top - 4}" x2="{x(value):.1f}" y2="{bottom}" '
            'stroke="#ddd"/>'
        )
        out.append(
            f'<text x="{x(value):.1f}" y="{bottom + 15}" text-anchor="middle">'
            f"{tick_text(value)}</text>"
        )
    out.append(f'<text x="{(left + width - right) / 2:.0f}" y="{bottom + 32}" '
               'text-anchor="middle">Gbit/s</text>')  # fmt: skip
    for i, link in enumerate(links):
        y = top + row * i
        name = f"{escape(link.sender)} -&gt; {escape(link.receiver)}"
        out.append(f'<text x="{left - 8}" y="{y + 15}" text-anchor="end">{name}</text>')
        if link.rate is None:
            out.append(
                f'<text x="{left + 4}" y="{y + 15}" fill="#d62728">failed: '
                f"{escape(link.error or '')}</text>"
            )
            continue
        slow = summary is not None and link is summary[0]
        colour = "#d62728" if slow else "#1f77b4"
        out.append(
            f'<rect x="{left}" y="{y + 3}" width="{x(link.rate.gbit_s) - left:.1f}" '
            f'height="{row - 8}" fill="{colour}"/>'
        )
        out.append(f'<text x="{x(link.rate.gbit_s) + 4:.1f}" y="{y + 15}">{_gbit(link)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
