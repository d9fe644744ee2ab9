"""The persistent node id: `<state-dir>/node-id`, 12 lowercase hex digits and a newline.

A read-only or full state directory must not stop the daemon: the id is then held in memory
and the caller is told that it could not be persisted.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from babbler.core.addressing import (
    ReservedNodeId,
    format_node_id,
    parse_node_id,
    random_node_id,
)
from babbler.core.errors import EnvironmentProblem
from babbler.host.whole import replace_whole

FILE_NAME = "node-id"


@dataclass(frozen=True)
class NodeId:
    value: int
    source: str  # "flag", "file", "generated"
    persist_error: str | None = None  # set when the id could not be written


def write_state_file(state_dir: Path, name: str, text: str) -> str | None:
    """Replace `<state_dir>/<name>` whole (host/whole.py; mode 0600, never through a
    symlink). Returns None, or the reason it failed."""
    path = state_dir / name
    try:
        replace_whole(path, text.encode(), 0o600)
    except OSError as error:
        return f"{path}: {error.strerror or error}"
    return None


def write_node_id(state_dir: Path, node_id: int) -> str | None:
    """Write the id file. Returns None, or the reason it failed."""
    return write_state_file(state_dir, FILE_NAME, f"{format_node_id(node_id)}\n")


def load_node_id(state_dir: Path, override: int | None) -> NodeId:
    """The node id to use: the flag's, else the file's, else a new random one (persisted)."""
    if override is not None:
        return NodeId(override, "flag")
    path = state_dir / FILE_NAME
    try:
        return NodeId(parse_node_id(path.read_text(encoding="ascii")), "file")
    except FileNotFoundError:
        pass
    except ReservedNodeId as error:  # someone wrote it: not ours to replace silently
        raise EnvironmentProblem(f"{path}: {error}; delete the file for a new random id") from None
    except (OSError, ValueError, UnicodeDecodeError):
        # A corrupt file is replaced rather than trusted; the new id is logged by the caller.
        pass
    value = random_node_id()
    return NodeId(value, "generated", write_node_id(state_dir, value))
