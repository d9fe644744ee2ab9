"""Facts about the host this process runs on, as against the platform babblerd acts as
(core/platform.py): in the macOS lab babblerd acts as macOS on a Linux host, and these stay
Linux's. The one module besides core/platform.py that reads `sys.platform`; the modules that
import it are the host rows of docs/design.md's table ("Platform and host"), a test holds
both to it.
"""

from __future__ import annotations

import sys

# The host runs Linux: pidfds, capabilities, /proc, SO_PEERCRED, abstract sockets,
# PR_SET_PDEATHSIG and prctl exist. Else (macOS) their BSD counterparts.
LINUX_HOST = sys.platform.startswith("linux")
