"""The macOS commands on a lab node's PATH: each a few lines of bash that hand the command line
to the node's server (`server`) through bash's /dev/tcp and print its answer. A command is
one bash process: the answer is read by bash's own `read -N` (the server says each part's
length), not copied by a `cat` it would start (a fork and exec more, a third of the cost)."""

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
LC_ALL=C  # `read -N` counts bytes, as the server does
printf '%s\\0' "$#" "{program}" "$@" >&3
part() {{  # the answer's next $1 bytes, printed
    [ "$1" -gt 0 ] || return 0
    IFS= read -r -N "$1" text <&3 || code=70
    printf '%s' "$text"
}}
read -r code errors length <&3 || exit 70
part "$errors" >&2
part "$length"
exit "$code"
"""


def install(bin_dir: Path, port: int = PORT) -> None:
    """Write the commands into `bin_dir` (made if missing), executable."""
    files.make_dir(bin_dir)
    for program in PROGRAMS:
        path = bin_dir / program
        files.write_file(path, SHIM.format(program=program, port=port))
        path.chmod(0o755)
