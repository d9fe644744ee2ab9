"""babblerd runs that must end before the daemon starts (bad flags, help, completion)."""

from __future__ import annotations

import os
from collections.abc import Sequence


def no_real_links(program: Sequence[str]) -> list[str]:
    """`program`, as root in a fresh network namespace: should babblerd start after all,
    it sees none of this machine's links (unprivileged it cannot touch them anyway)."""
    return ["unshare", "--net", *program] if os.geteuid() == 0 else list(program)
