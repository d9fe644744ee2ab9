"""One picture from the results: event latency per reader, convergence per scenario and
mode, and CPU per node as the mesh grows, all on log scales. Plain SVG, no plotting library needed.

    .venv/bin/python bench/plot.py [--results bench/results] [--out docs/benchmarks.svg]
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import common

WIDTH, ROW, LEFT, RIGHT = 960, 22, 250, 40
COLOURS = {
    "babbler": "#1f77b4",
    "babbler-hello-0.25": "#7f7f7f",
    "babeld-defaults": "#d62728",
    "babeld-same-hello": "#ff7f0e",
}


def el(tag: str, text: str = "", **attrs: Any) -> str:
    """One SVG element; attribute names use _ for -, floats get one decimal."""
    parts = " ".join(
        f'{k.rstrip("_").replace("_", "-")}="{v:.1f}"'
        if isinstance(v, float)
        else f'{k.rstrip("_").replace("_", "-")}="{v}"'
        for k, v in attrs.items()
    )
    return f"<{tag} {parts}>{text}</{tag}>" if text else f"<{tag} {parts}/>"


def label(x: float, y: float, text: str, size: int = 12, **attrs: Any) -> str:
    return el("text", text, x=x, y=y, font_size=size, **attrs)


def scale(low: float, high: float, width: float) -> Any:
    a, b = math.log10(low), math.log10(high)
    return lambda v: LEFT + (math.log10(max(v, low)) - a) / (b - a) * width


def axis(y: float, low: float, high: float, unit: str, x: Any) -> list[str]:
    out = [el("line", x1=LEFT, y1=y, x2=WIDTH - RIGHT, y2=y, stroke="#888")]
    tick = 10 ** math.floor(math.log10(low))
    while tick <= high * 1.0001:
        for m in (1, 2, 5):
            v = tick * m
            if low <= v <= high:
                out.append(el("line", x1=x(v), y1=y, x2=x(v), y2=y + 4, stroke="#888"))
                out.append(label(x(v), y + 16, f"{v:g}", 11, text_anchor="middle"))
        tick *= 10
    out.append(label(WIDTH - RIGHT, y + 30, f"{unit} (log scale)", 11, text_anchor="end"))
    return out


def latency_panel(data: dict[str, Any], top: float) -> tuple[list[str], float]:
    phases = {
        k: v for k, v in data["phases"].items() if isinstance(v, dict) and v["latency_ms"].get("n")
    }
    low = max(0.05, min(p["latency_ms"]["min"] for p in phases.values()) * 0.8)
    high = max(p["latency_ms"]["max"] for p in phases.values()) * 1.2
    x = scale(low, high, WIDTH - LEFT - RIGHT)
    rate = data["chatter"]["lines_per_second"]
    title = f"Event latency: babeld writes a line, a client has it ({rate:.0f} lines/s)"
    out = [label(10, top, title, 14, font_weight="bold")]
    out.append(label(10, top + 16, "box: p50-p99, whiskers: min-max, tick: p90", 11))
    y = top + 34
    for name, p in phases.items():
        s = p["latency_ms"]
        colour = (
            "#2ca02c"
            if name == "direct"
            else "#7f7f7f"
            if name.startswith("polling")
            else COLOURS["babbler"]
        )
        mid = y + ROW / 2
        width = max(1.0, x(s["p99"]) - x(s["p50"]))
        out.append(label(LEFT - 8, mid + 4, name, text_anchor="end"))
        out.append(el("line", x1=x(s["min"]), y1=mid, x2=x(s["max"]), y2=mid, stroke=colour))
        out.append(
            el("rect", x=x(s["p50"]), y=y + 4, width=width, height=ROW - 8, fill=colour,
               opacity=0.6)
        )  # fmt: skip
        out.append(el("line", x1=x(s["p90"]), y1=y + 2, x2=x(s["p90"]), y2=y + ROW - 2,
                      stroke="black"))  # fmt: skip
        y += ROW
    out += axis(y + 4, low, high, "milliseconds", x)
    return out, y + 50


def convergence_panel(data: dict[str, Any], top: float) -> tuple[list[str], float]:
    results = data["results"]
    values = [t for by_mode in results.values() for r in by_mode.values() for t in r["seconds"]]
    low, high = min(values) * 0.8, max(values) * 1.2
    x = scale(low, high, WIDTH - LEFT - RIGHT)
    title = "Convergence: start, until every node pings every other (dots: runs, bar: median)"
    out = [label(10, top, title, 14, font_weight="bold")]
    y = top + 14
    for i, (mode, colour) in enumerate(COLOURS.items()):
        out.append(el("rect", x=LEFT + i * 170, y=y, width=10, height=10, fill=colour))
        out.append(label(LEFT + i * 170 + 14, y + 9, mode, 11))
    y += 20
    for scenario, by_mode in results.items():
        for mode, r in by_mode.items():
            colour = COLOURS.get(mode, "#555")
            mid = y + ROW / 2
            out.append(label(LEFT - 8, mid + 4, f"{scenario} · {mode}", text_anchor="end"))
            bar = x(r["p50"]) - LEFT
            out.append(
                el("rect", x=LEFT, y=y + 6, width=bar, height=ROW - 12, fill=colour, opacity=0.35)
            )
            for t in r["seconds"]:
                out.append(el("circle", cx=x(t), cy=mid, r=3, fill=colour))
            y += ROW
        y += 6
    out += axis(y + 4, low, high, "seconds", x)
    return out, y + 50


Series = Callable[[dict[str, Any], dict[str, Any]], float]


def _alone(ref: dict[str, Any], b: dict[str, Any]) -> float:
    return float(ref["idle"]["babeld_cpu_percent"])


def _under(ref: dict[str, Any], b: dict[str, Any]) -> float:
    return float(b["idle"]["babeld_cpu_percent"])


def _babblerd(ref: dict[str, Any], b: dict[str, Any]) -> float:
    return float(b["idle"]["babblerd_cpu_percent"])


def _watched(ref: dict[str, Any], b: dict[str, Any]) -> float:
    return float(b["watched"]["babblerd_cpu_percent"])


# (label, colour, the value from a size's two result rows: the reference, then babbler)
SCALE_SERIES: tuple[tuple[str, str, Series], ...] = (
    ("babeld alone", COLOURS["babeld-same-hello"], _alone),
    ("babeld under babbler", "#9467bd", _under),
    ("babblerd", COLOURS["babbler"], _babblerd),
    ("babblerd, 10 watch clients", "#17becf", _watched),
)


def scale_panel(data: dict[str, Any], top: float) -> tuple[list[str], float]:
    rows = data["results"]
    pairs = [(ref, b) for ref, b in zip(rows[0::2], rows[1::2], strict=True) if "watched" in b]
    values = [get(ref, b) for ref, b in pairs for _, _, get in SCALE_SERIES]
    low, high = max(0.05, min(values) * 0.8), max(values) * 1.2
    x = scale(low, high, WIDTH - LEFT - RIGHT)
    title = "CPU per node as the mesh grows (% of one core, converged, mean over nodes)"
    out = [label(10, top, title, 14, font_weight="bold")]
    y = top + 14
    for i, (name, colour, _) in enumerate(SCALE_SERIES):
        out.append(el("rect", x=LEFT + i * 170, y=y, width=10, height=10, fill=colour))
        out.append(label(LEFT + i * 170 + 14, y + 9, name, 11))
    y += 20
    for ref, b in pairs:
        mid = y + ROW / 2
        name = f"{b['topology']} of {b['nodes']}, hello {b.get('hello_s', 0.1):g} s"
        out.append(label(LEFT - 8, mid + 4, name, text_anchor="end"))
        out.append(el("line", x1=LEFT, y1=mid, x2=WIDTH - RIGHT, y2=mid, stroke="#eee"))
        for _, colour, get in SCALE_SERIES:
            out.append(el("circle", cx=x(get(ref, b)), cy=mid, r=5, fill=colour, opacity=0.8))
        y += ROW
    out += axis(y + 4, low, high, "% of one core", x)
    return out, y + 50


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--results", type=Path, default=common.RESULTS)
    parser.add_argument("--out", type=Path, default=common.ROOT / "docs" / "benchmarks.svg")
    args = parser.parse_args()
    body: list[str] = []
    y = 24.0
    panels = (
        ("latency", latency_panel),
        ("convergence", convergence_panel),
        ("scale", scale_panel),
    )
    for name, panel in panels:
        path = args.results / f"{name}.json"
        if path.exists():
            part, y = panel(json.loads(path.read_text()), y)
            body += part
            y += 20
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{y:.0f}" '
        f'font-family="sans-serif"><rect width="100%" height="100%" fill="white"/>'
        + "".join(body)
        + "</svg>\n"
    )
    args.out.write_text(svg)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
