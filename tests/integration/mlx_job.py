"""One rank of a real MLX job, as `mlx.launch` starts it (MLX_RANK and MLX_HOSTFILE set):
an all_sum and an all_gather checked against what every rank must get, then optionally a
large all_gather, then optionally ROUNDS steady all_sums of ROUND_MIB (1) 50 ms apart (rank 0
writes OUT_DIR/steady when they begin; each round's start and length are kept: a cable
pulled meanwhile shows as the rounds it slowed); the result is written as JSON to
OUT_DIR/rank<r>.json.

Usage: python mlx_job.py OUT_DIR [LARGE_MIB [ROUNDS [ROUND_MIB]]]
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import mlx.core as mx


def main() -> None:
    out_dir, large_mib = Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 0
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    round_mib = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    group = mx.distributed.init(strict=True, backend="ring")
    rank, size = group.rank(), group.size()
    summed = mx.distributed.all_sum(mx.full((1024,), rank + 1, dtype=mx.float32))
    gathered = mx.distributed.all_gather(mx.full((4,), rank, dtype=mx.int32))
    mx.eval(summed, gathered)
    result = {
        "rank": rank,
        "size": size,
        "all_sum_ok": bool(mx.all(summed == size * (size + 1) / 2).item()),
        "all_gather": gathered.tolist(),
    }
    if large_mib:
        block = mx.full((large_mib * 2**20 // 4,), rank, dtype=mx.float32)
        mx.eval(block)
        start = time.perf_counter()
        big = mx.distributed.all_gather(block)
        mx.eval(big)
        result["large_s"] = time.perf_counter() - start
        result["large_ok"] = all(
            bool(mx.all(big[r * block.size : (r + 1) * block.size] == r).item())
            for r in range(size)
        )
    if rounds:
        steady(group, rank, (rounds, round_mib), out_dir, result)
    (out_dir / f"rank{rank}.json").write_text(json.dumps(result))


def steady(
    group: mx.distributed.Group,
    rank: int,
    work: tuple[int, int],
    out_dir: Path,
    result: dict[str, Any],
) -> None:
    rounds, mib = work
    block = mx.full((mib * 2**18,), rank + 1, dtype=mx.float32)
    mx.eval(block)
    if rank == 0:
        (out_dir / "steady").write_text(str(time.time()))
    times, ok = [], True
    for _ in range(rounds):
        start = time.time()
        summed = mx.distributed.all_sum(block, group=group)
        mx.eval(summed)
        ok = ok and bool(mx.all(summed == group.size() * (group.size() + 1) / 2).item())
        times.append((start, time.time() - start))
        time.sleep(0.05)
    result["steady"] = times
    result["steady_ok"] = ok


if __name__ == "__main__":
    main()
