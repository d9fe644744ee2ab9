"""One rank of the MLX bandwidth bench (bench/mlx_bandwidth.py starts it by `mlx.launch`):
for each size, after a barrier, the best of REPEAT runs (5 x REPEAT up to 1 MiB) of
- oneway: rank 0 sends SIZE bytes to rank 1, which answers with 4 bytes (timed on rank 0:
  the transfer plus one small message back, which is what tells rank 0 it arrived);
- roundtrip: rank 0 sends SIZE bytes, rank 1 sends them back (timed on rank 0);
- allgather: every rank gives SIZE bytes and gets everyone's (timed on each rank).
Written as JSON to OUT_DIR/rank<r>.json: {op: {size: seconds}}.

Usage: python mlx_ops.py OUT_DIR SIZES(comma-separated bytes) OPS(comma-separated) REPEAT
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import mlx.core as mx

SMALL = 1 << 20  # bytes: up to this size, five times the runs (each is quick, and noisy)


def barrier() -> None:
    mx.eval(mx.distributed.all_sum(mx.zeros((1,))))


def best(repeat: int, run: Callable[[], None]) -> float:
    """The shortest of `repeat` runs, each after a barrier and one untimed run to warm up;
    `run` evaluates what it does."""
    barrier()
    run()
    times = []
    for _ in range(repeat):
        barrier()
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def step(x: mx.array) -> None:
    mx.eval(x)  # one operation at a time: a send and a receive in one eval may run either first


def main() -> None:
    out_dir, sizes, ops, repeat = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    group = mx.distributed.init(strict=True, backend="ring")
    rank = group.rank()
    ack = mx.zeros((1,), dtype=mx.float32)
    mx.eval(ack)
    results: dict[str, dict[int, float]] = {op: {} for op in ops.split(",")}
    for size in (int(s) for s in sizes.split(",")):
        data = mx.full((size // 4,), rank, dtype=mx.float32)
        mx.eval(data)
        for op in results:
            back = ack if op == "oneway" else data

            def run(op: str = op, data: mx.array = data, back: mx.array = back) -> None:
                if op == "allgather":
                    step(mx.distributed.all_gather(data))
                elif rank == 0:
                    step(mx.distributed.send(data, 1))
                    step(mx.distributed.recv_like(back, 1))
                elif rank == 1:
                    step(mx.distributed.recv_like(data, 0))
                    step(mx.distributed.send(back, 0))

            results[op][size] = best(repeat if size > SMALL else repeat * 5, run)
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps(results))


if __name__ == "__main__":
    main()
