"""The record of the kernel settings a babblerd changed (daemon/sysctls.py writes it), read
by the next babblerd after a crash and by `babblerctl doctor`. Its format is in
daemon/sysctls.py's docstring."""

from __future__ import annotations

import json
from pathlib import Path

FILE = "sysctls"  # under the state dir
PROC_SYS = Path("/proc/sys")
LINUX_BOOT = "kernel/random/boot_id"  # the setting under PROC_SYS that names this boot


def read_record(state_dir: Path, boot: str) -> dict[str, tuple[str, str]]:
    """What the record in `state_dir` says a babblerd of `boot` changed and did not put
    back: {name: (before, ours)}; empty for no record, another boot or nonsense. Raises
    OSError when the record cannot be read (the state dir is root's, 0700)."""
    try:
        kept = json.loads((state_dir / FILE).read_text())
    except (FileNotFoundError, ValueError):  # no record, or not one of ours
        return {}
    if not isinstance(kept, dict) or kept.get("boot") != boot:
        return {}  # another boot: every setting is the system's own again
    entries = kept.get("set")
    return {
        str(name): (str(pair[0]), str(pair[1]))
        for name, pair in (entries.items() if isinstance(entries, dict) else ())
        if isinstance(pair, list) and len(pair) == 2
    }
