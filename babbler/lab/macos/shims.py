"""The macOS commands on a lab node's PATH: each a few lines of bash that hand the command line
to the node's server (`server`) through bash's /dev/tcp and print its answer."""

from __future__ import annotations

from pathlib import Path

from babbler.lab import files
from babbler.lab.macos.commands import PROGRAMS
from babbler.lab.macos.server import PORT

SHIM = """#!/bin/bash
# babbler-lab's macOS `{program}`: the node's command server answers (babbler/lab/macos).
{{ exec 3<>/dev/tcp/127.0.0.1/{port}; }} 2>/dev/null || {{
    echo "{program}: babbler-lab's macOS command server does not answer on port {port}" >&2
    exit 69
}}
printf '%s\\0' "$#" "{program}" "$@" >&3
read -r code length <&3 || exit 70
if [ "$length" -gt 0 ]; then IFS= read -r -N "$length" err <&3; printf '%s' "$err" >&2; fi
cat <&3
exit "$code"
"""


def install(bin_dir: Path, port: int = PORT) -> None:
    """Write the commands into `bin_dir` (made if missing), executable."""
    files.make_dir(bin_dir)
    for program in PROGRAMS:
        path = bin_dir / program
        files.write_file(path, SHIM.format(program=program, port=port))
        path.chmod(0o755)
