"""Mesh links that stay without a neighbour (pure): a link babeld uses, up, with nobody
answering its hellos for a while is said once, with the likely causes; and said again
when a neighbour comes (DESIGN.md "the doctor": a link up with no neighbour).

Two nodes with different mesh keys are each other's no-neighbour: babeld drops every
packet that fails the key, and nothing else says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# How long a link may be up without a neighbour before it is said: babeld meets one within
# a few hellos (0.1 s each by default; 4 s at babeld's own default, so 12-17 s); a node
# booting beside this one takes some seconds more.
QUIET = 30.0
CAUSES = "the far end runs no babblerd, its mesh key differs, or the cable is not plugged in"


@dataclass
class LonelyLinks:
    quiet: float = QUIET
    since: dict[str, float] = field(default_factory=dict)  # link -> without neighbour since
    said: set[str] = field(default_factory=set)

    def check(
        self, now: float, used: set[str], with_neighbour: set[str]
    ) -> tuple[list[str], list[str]]:
        """(links to say are lonely now, links said before that have a neighbour now).
        `used`: the mesh links babeld uses that are up."""
        for name in list(self.since):
            if name not in used or name in with_neighbour:
                del self.since[name]
        found = sorted(self.said & with_neighbour)
        self.said -= set(found) | (self.said - used)
        lonely = []
        for name in sorted(used - with_neighbour):
            since = self.since.setdefault(name, now)
            if now - since >= self.quiet and name not in self.said:
                self.said.add(name)
                lonely.append(name)
        return lonely, found
