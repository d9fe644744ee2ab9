"""What an MLX ring job sees when a cable of its ring is pulled (DESIGN.md "IPv4": the
cable's addresses held on the loopback, the job's connections round the mesh): a 4-ring,
every link end shaped to 1 Gbit/s (tc tbf, as BABELD.md measured parallel cables), the
ring job of tests/integration/mlx_job.py doing all_sums of --mib MiB 50 ms apart; --pull s
into its rounds the cable n1-n2 is pulled out at both ends for --out s. Reported: the median
round and its all_sum bandwidth before the pull, on the detour, and back on the cable (the
reference: the same job on its own cables, in the same run), the ratio detour / cable, and
the longest round (the stall).

    sudo .venv/bin/python bench/detour.py [--mib 16] [--rounds 80] [--pull 4] [--out 6]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import common
import linkbench

from babbler.lab import Lab
from babbler.lab.jobs import mlx_launch, ring_hostfile

JOB = common.ROOT / "tests" / "integration" / "mlx_job.py"
SHAPE = ["tbf", "rate", "1gbit", "burst", "256kb", "latency", "50ms"]  # as mlx_bandwidth.py


def run(mib: int, rounds: int, pull_at: float, out_for: float) -> dict[str, Any]:
    lab = Lab.create(f"dt{os.getpid() % 10000}", 4, "ring", ["--mode", "always"])
    try:
        for node in lab.nodes:
            for link in lab.far_ends(node):
                lab.exec(node, "tc", "qdisc", "add", "dev", link, "root", *SHAPE)
        linkbench.started(lab)
        file = ring_hostfile(lab.nodes[0], 4, 1)
        hosts = {str(lab.status(n)["node_address_v4"]): n.netns for n in lab.nodes}
        with tempfile.TemporaryDirectory(prefix="detour") as tmp:
            work = Path(tmp)
            (work / "hosts.json").write_text(json.dumps(file))
            (work / "out").mkdir()
            job = [str(JOB), str(work / "out"), "0", str(rounds), str(mib)]
            done: dict[str, Any] = {}
            thread = threading.Thread(
                target=lambda: done.update(p=mlx_launch(work / "hosts.json", job, hosts, work, 600))
            )
            thread.start()
            while not (work / "out" / "steady").exists() and thread.is_alive():
                time.sleep(0.1)
            time.sleep(pull_at)
            lab.plug(1, 2, up=False)
            pulled = time.time()
            time.sleep(out_for)
            lab.plug(1, 2)
            back = time.time()
            thread.join()
            if done["p"].returncode != 0:
                raise RuntimeError(done["p"].stderr)
            ranks = [json.loads((work / "out" / f"rank{r}.json").read_text()) for r in range(4)]
    finally:
        lab.down()
    # a round is as long as its slowest rank's: by round number
    by_round = [max(r["steady"][i][1] for r in ranks) for i in range(rounds)]
    starts = [min(r["steady"][i][0] for r in ranks) for i in range(rounds)]

    def phase(start: float, end: float) -> dict[str, float]:
        lengths = [t for s, t in zip(starts, by_round, strict=True) if start <= s < end]
        median = statistics.median(lengths)
        # ring all_sum: each rank sends 2 (N-1)/N of the buffer over its cable
        return {
            "rounds": len(lengths),
            "median_s": median,
            "gbit_s": 1.5 * mib * 8 * 2**20 / median / 1e9,
        }

    out = {
        "mib": mib,
        "rounds": rounds,
        "pulled_for_s": out_for,
        "before": phase(0, pulled),
        "detour": phase(pulled + 1, back),  # from 1 s in: babeld's detour settled
        "after": phase(back + 1, float("inf")),
        "longest_round_s": max(by_round),
        "all_ok": all(r["steady_ok"] for r in ranks),
    }
    out["detour_over_cable"] = out["detour"]["gbit_s"] / out["before"]["gbit_s"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=80)
    parser.add_argument("--pull", type=float, default=4.0)
    parser.add_argument("--out", type=float, default=6.0)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    common.need_root()
    result = run(args.mib, args.rounds, args.pull, args.out)
    rows = [
        [name, result[name]["rounds"], result[name]["median_s"], result[name]["gbit_s"]]
        for name in ("before", "detour", "after")
    ]
    print(
        common.table(
            "MLX ring all_sum, 4-ring at 1 Gbit/s", ["phase", "rounds", "median s", "Gbit/s"], rows
        )
    )
    ratio, longest = result["detour_over_cable"], result["longest_round_s"]
    print(f"detour / cable {ratio:.2f}; longest round {longest:.2f} s; right: {result['all_ok']}")
    print(common.write("detour", result, args.json))


if __name__ == "__main__":
    main()
