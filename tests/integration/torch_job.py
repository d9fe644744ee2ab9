"""One rank of a torch job over gloo, started with the environment torchrun gives it
(MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE; GLOO_SOCKET_IFNAME from babblerctl): an
all_reduce checked, written as JSON to OUT_DIR/rank<r>.json.

Usage: python3 torch_job.py OUT_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import torch.distributed as dist


def main() -> None:
    dist.init_process_group("gloo")  # env://
    rank, size = dist.get_rank(), dist.get_world_size()
    value = torch.full((1 << 20,), float(rank + 1))
    dist.all_reduce(value)
    ok = bool(torch.all(value == size * (size + 1) / 2))
    Path(sys.argv[1], f"rank{rank}.json").write_text(json.dumps({"rank": rank, "ok": ok}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
