"""One lab node: its namespace, its files, the pid of its babblerd."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass
class Node:
    index: int
    netns: str
    base: str
    pid: int | None = None

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
