"""One lab node: its namespace, its files, the pid of its babblerd."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Node:
    index: int
    netns: str
    base: str
    pid: int | None = None
    platform: str = "linux"  # what its babblerd acts as: "linux" or "macos" (lab/macos/)
    # macOS: its ports in the order they were cabled (the lab's names, `v1x2`): the i-th
    # is `en<2+i>` in the namespace, as a Mac's Thunderbolt ports are en2, en3, ...
    ports: list[str] = field(default_factory=list)
    helper_pid: int | None = None  # macOS: the pid of its command server

    @property
    def macos(self) -> bool:
        return self.platform == "macos"

    @property
    def bin_dir(self) -> Path:
        """macOS: where its commands are (first on its babblerd's PATH)."""
        return Path(self.base) / "bin"

    @property
    def name(self) -> str:
        return f"n{self.index}"

    @property
    def run_dir(self) -> Path:
        return Path(self.base) / "run"

    @property
    def state_dir(self) -> Path:
        return Path(self.base) / "state"

    @property
    def socket(self) -> Path:
        return self.run_dir / "babblerd.sock"

    @property
    def log(self) -> Path:
        return Path(self.base) / "babblerd.log"
