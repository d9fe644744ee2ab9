"""One rank of a real MLX job, as `mlx.launch` starts it (MLX_RANK and MLX_HOSTFILE set):
an all_sum and an all_gather checked against what every rank must get, then optionally a
large all_gather; the result is written as JSON to OUT_DIR/rank<r>.json.

Usage: python mlx_job.py OUT_DIR [LARGE_MIB]
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import mlx.core as mx


def main() -> None:
    out_dir, large_mib = Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 0
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
    (out_dir / f"rank{rank}.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main()
