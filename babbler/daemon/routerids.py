"""babeld's router ids as babblerd picks and keeps them (identity.py says why). Lean: the
early start (early.py) takes one before the daemon's heavy imports."""

from __future__ import annotations

import os
from pathlib import Path

from babbler.daemon.nodeid import write_state_file

ROUTER_IDS_FILE = "router-ids"
# Router ids kept as ours: a restart loop at the back-off's cap takes 8 minutes to use 16,
# far longer than neighbours keep forwarding an old id's announcements (16 s measured).
KEEP_ROUTER_IDS = 16


def random_router_id() -> str:
    """Eight random bytes as babeld writes a router id, marked locally administered and
    unicast (as an EUI-64 that no hardware has)."""
    raw = bytearray(os.urandom(8))
    raw[0] = (raw[0] | 0x02) & ~0x01
    return ":".join(f"{b:02x}" for b in raw)


def read_router_ids(state_dir: Path) -> list[str]:
    try:
        lines = (state_dir / ROUTER_IDS_FILE).read_text(encoding="ascii").split()
    except (OSError, UnicodeDecodeError):
        return []
    return [line for line in lines if len(line) == 23 and line.count(":") == 7]


def write(state_dir: Path, ids: list[str]) -> str | None:
    """Keep the last KEEP_ROUTER_IDS ids; None, or why they could not be kept."""
    text = "".join(f"{i}\n" for i in ids[-KEEP_ROUTER_IDS:])
    return write_state_file(state_dir, ROUTER_IDS_FILE, text)


def take(state_dir: Path) -> str:
    """A fresh router id, kept as ours (best effort) before babeld starts with it."""
    router_id = random_router_id()
    write(state_dir, [*read_router_ids(state_dir), router_id])
    return router_id
