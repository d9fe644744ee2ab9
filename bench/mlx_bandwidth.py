"""MLX over the mesh: what a real MLX ring job gets from the cables, beside babblerctl bench
and iperf3 on the same links, in one run. After the original project's
bench/test_mlx_bandwidth.py (send/recv, round trip, all-gather between two hosts, 1 KiB up).

sweep     two lab nodes, one cable (veth): `babblerctl hostfile --format mlx` on n1, then
          `mlx.launch` (babbler/lab/jobs.py) runs bench/mlx_ops.py on both: one way, round
          trip and all_gather for each size, 1 KiB to --max-size; on the same cable,
          `babblerctl bench n2` (its sweep and one TCP stream) and iperf3 (one stream to
          n2's cable address, the address MLX uses); MLX / iperf3 as a ratio
parallel  two lab nodes, two cables, every end shaped to 1 Gbit/s (tc tbf): all_gather of
          --parallel-size per rank with the hostfile babblerctl writes (both cables) against
          the same file cut to one address per host (one cable), best of 3 each; iperf3 on
          one shaped cable as the reference

  sudo .venv/bin/python bench/mlx_bandwidth.py [--max-size 1G] [--svg docs/mlx.svg]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import common
import linkbench
import plot

from babbler.lab import Lab, Node, netns
from babbler.lab.jobs import mlx_launch, ring_hostfile

OPS = Path(__file__).with_name("mlx_ops.py")
KIB = 1024
SHAPE = ["tbf", "rate", "1gbit", "burst", "256kb", "latency", "50ms"]  # as BABELD.md measured


def label(size: int) -> str:
    return f"{size // KIB} KiB" if size < KIB**2 else f"{size // KIB**2} MiB"


def sizes(largest: int) -> list[int]:
    out, size = [], KIB
    while size <= largest:
        out.append(size)
        size *= 4
    return out


def run_ops(
    lab: Lab, file: list[dict[str, Any]], sizes_: list[int], ops: str, repeat: int
) -> dict[str, dict[int, float]]:
    """mlx_ops.py on every host of `file` by mlx.launch: {op: {size: seconds}}, the slowest
    rank's time for all_gather, rank 0's for the others."""
    with tempfile.TemporaryDirectory(prefix="mlxbench") as tmp:
        work = Path(tmp)
        (work / "hosts.json").write_text(json.dumps(file))
        hosts = {str(lab.status(n)["node_address_v4"]): n.netns for n in lab.nodes}
        command = [str(OPS), str(work), ",".join(map(str, sizes_)), ops, str(repeat)]
        done = mlx_launch(work / "hosts.json", command, hosts, work, timeout=1800)
        if done.returncode != 0:
            raise RuntimeError(f"mlx.launch: {done.stdout[-2000:]}\n{done.stderr[-2000:]}")
        ranks = [json.loads((work / f"rank{r}.json").read_text()) for r in range(len(file))]
    out: dict[str, dict[int, float]] = {}
    for op in ops.split(","):
        out[op] = {
            int(size): max(r[op][size] for r in ranks) if op == "allgather" else seconds
            for size, seconds in ranks[0][op].items()
        }
    return out


def at(lab: Lab, file: list[dict[str, Any]], node: Node) -> str:
    """`node`'s first address in the hostfile (its end of a cable)."""
    mine = str(lab.status(node)["node_address_v4"])
    return str(next(h["ips"][0] for h in file if h["ssh"] == mine))


def gbit(size: int, seconds: float, op: str) -> float:
    """Payload rate: a round trip carries the size twice; all_gather brings each rank the
    other's SIZE (two ranks)."""
    return (2 if op == "roundtrip" else 1) * size * 8 / seconds / 1e9


def sweep(largest: int, seconds: float) -> dict[str, Any]:
    lab = Lab.create(f"mx{os.getpid() % 10000}", 2, "line", ["--mode", "always"])
    try:
        n1 = linkbench.started(lab)
        n2 = lab.nodes[1]
        file = ring_hostfile(n1, 2, 1)
        measured = run_ops(lab, file, sizes(largest), "oneway,roundtrip,allgather", 3)
        (ctl,) = linkbench.ctl_bench(
            lab, n1, "n2", "--duration", f"{seconds:g}", "--max-size", str(largest)
        )["nodes"]
        cable = at(lab, file, n2)  # n2's address on the cable, where MLX connects to it
        iperf = linkbench.iperf3(lab, n1, n2, cable, seconds, reverse=False)
        return {"hostfile": file, "mlx": measured, "babblerctl": ctl, "iperf3_gbit_s": iperf}
    finally:
        lab.down()


def parallel(size: int) -> dict[str, Any]:
    lab = Lab.create(
        f"mp{os.getpid() % 10000}",
        2,
        "line",
        ["--mode", "always"],
    )
    try:
        n1, n2 = lab.nodes
        netns.add_link(1, n1.netns, 2, n2.netns, prefix="vb")  # the second cable
        for node, links in ((n1, ("v1x2", "vb1x2")), (n2, ("v2x1", "vb2x1"))):
            for link in links:
                done = lab.exec(node, "tc", "qdisc", "add", "dev", link, "root", *SHAPE)
                if done.returncode != 0:
                    raise RuntimeError(done.stderr)
        linkbench.started(lab)
        both = ring_hostfile(n1, 2, 2)
        one = [{"ssh": h["ssh"], "ips": h["ips"][:1]} for h in both]
        out: dict[str, Any] = {"size": size, "hostfile": both}
        for name, file in (("two_cables", both), ("one_cable", one)):
            seconds = run_ops(lab, file, [size], "allgather", 3)["allgather"][size]
            out[name] = {"seconds": seconds, "gbit_s": gbit(size, seconds, "allgather")}
        ratio: float = out["two_cables"]["gbit_s"] / out["one_cable"]["gbit_s"]
        out["ratio"] = ratio
        out["iperf3_one_cable_gbit_s"] = linkbench.iperf3(
            lab, n1, n2, at(lab, one, n2), 5.0, reverse=False
        )
        return out
    finally:
        lab.down()


def svg(result: dict[str, Any]) -> str:
    """Gbit/s against message size: MLX's three operations, babblerctl bench's sweep, and
    iperf3's one stream as a line."""
    mlx, ctl = result["mlx"], result["babblerctl"]
    names = {"oneway": "one way", "roundtrip": "round trip", "allgather": "all_gather"}
    series = {
        f"MLX {names[op]}": [(int(s), gbit(int(s), t, op)) for s, t in mlx[op].items()]
        for op in mlx
    }
    series["babblerctl bench (one message)"] = [
        (r["bytes"], r["gbyte_s"] * 8) for r in ctl.get("sweep", [])
    ]
    colours = ["#1f77b4", "#ff7f0e", "#2ca02c", "#7f7f7f"]
    points = [p for s in series.values() for p in s]
    low_x, high_x = min(p[0] for p in points), max(p[0] for p in points)
    high_y = float(max([p[1] for p in points] + [result["iperf3_gbit_s"]])) * 1.1
    left, top, width, height = plot.LEFT, 40.0, plot.WIDTH - plot.LEFT - plot.RIGHT, 300.0
    x = plot.scale(low_x, high_x, width)

    def y(v: float) -> float:
        return top + height - v / high_y * height

    out = [plot.label(20, 24, "MLX ring over one cable (veth) vs babblerctl bench and iperf3", 14)]
    out += [plot.el("line", x1=left, y1=top + height, x2=left + width, y2=top + height,
                    stroke="#888")]  # fmt: skip
    for exp in range(int(math.log2(low_x)), int(math.log2(high_x)) + 1, 4):
        v = 2**exp
        out.append(plot.label(x(v), top + height + 16, label(v), 11, text_anchor="middle"))
    for tick in range(0, int(high_y) + 1, max(1, int(high_y) // 5)):
        out.append(plot.label(left - 8, y(tick) + 4, f"{tick} Gbit/s", 11, text_anchor="end"))
    iperf = result["iperf3_gbit_s"]
    out.append(plot.el("line", x1=left, y1=y(iperf), x2=left + width, y2=y(iperf),
                       stroke="#d62728", stroke_dasharray="4 3"))  # fmt: skip
    out.append(plot.label(left + width, y(iperf) - 4, "iperf3, one stream", 11,
                          text_anchor="end", fill="#d62728"))  # fmt: skip
    for n, (name, pts) in enumerate(series.items()):
        path = " ".join(f"{x(s):.1f},{y(g):.1f}" for s, g in pts)
        out.append(plot.el("polyline", points=path, fill="none", stroke=colours[n % 4],
                           stroke_width=2))  # fmt: skip
        out.append(plot.label(left + 10, top + 14 + 16 * n, name, 12, fill=colours[n % 4]))
    total = top + height + 40
    head = f'<svg xmlns="http://www.w3.org/2000/svg" width="{plot.WIDTH}" height="{total:.0f}">'
    return "\n".join([head, '<rect width="100%" height="100%" fill="white"/>', *out, "</svg>"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-size", default="1G", help="the sweep's largest message")
    parser.add_argument("--parallel-size", default="128M", help="all_gather size per rank")
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per stream")
    parser.add_argument("--svg", type=Path, help="draw the sweep into this SVG file")
    parser.add_argument("--quick", action="store_true", help="to 16 MiB, 16 MiB parallel")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    common.need_root()
    unit = {"K": KIB, "M": KIB**2, "G": KIB**3}
    largest = int(args.max_size[:-1]) * unit[args.max_size[-1].upper()]
    size = int(args.parallel_size[:-1]) * unit[args.parallel_size[-1].upper()]
    if args.quick:
        largest, size, args.duration = 16 * KIB**2, 16 * KIB**2, 1.0
    over = sweep(largest, args.duration)
    ctl = {r["bytes"]: r["gbyte_s"] * 8 for r in over["babblerctl"].get("sweep", [])}
    rows = []
    for s in sizes(largest):
        row: list[Any] = [label(s)]
        row += [gbit(s, over["mlx"][op][s], op) for op in ("oneway", "roundtrip", "allgather")]
        row.append(ctl.get(s, float("nan")))
        rows.append(row)
    header = ["size", "MLX one way", "MLX round trip", "MLX all_gather", "babblerctl bench"]
    print(common.table("one cable, Gbit/s of payload (best of 3)", header, rows))
    stream = over["babblerctl"]["send"]["gbit_s"]
    top = max(gbit(largest, over["mlx"][op][largest], op) for op in over["mlx"])
    print(f"\none TCP stream: iperf3 {over['iperf3_gbit_s']:.2f} Gbit/s, babblerctl bench "
          f"{stream:.2f}; MLX's best at {label(largest)}: {top:.2f} "
          f"({top / over['iperf3_gbit_s']:.2f} of iperf3)")  # fmt: skip
    both = parallel(size)
    print()
    print(
        common.table(
            f"two cables shaped to 1 Gbit/s each, all_gather of {label(size)} per rank",
            ["hostfile", "Gbit/s", "seconds"],
            [
                [
                    "both cables (babblerctl hostfile)",
                    both["two_cables"]["gbit_s"],
                    both["two_cables"]["seconds"],
                ],
                [
                    "one cable (first ip only)",
                    both["one_cable"]["gbit_s"],
                    both["one_cable"]["seconds"],
                ],
            ],
        )
    )
    print(f"\nratio {both['ratio']:.2f}; iperf3 on one shaped cable "
          f"{both['iperf3_one_cable_gbit_s']:.2f} Gbit/s")  # fmt: skip
    if args.svg is not None:
        args.svg.write_text(svg(over))
    path = common.write("mlx-bandwidth", {"sweep": over, "parallel": both}, args.out)
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
