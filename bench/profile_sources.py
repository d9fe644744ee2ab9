"""Where babblerd's CPU goes, from py-spy's raw (collapsed) samples: each sample's stack
classified by the source of work that made it (bench/first_minute.py --profile). Pure.

A collapsed line is `frame;frame;... count`, the stack from its root (the thread's first
frame) to the frame that ran; a frame is `function (path:line)`. A sample goes to the
first rule of RULES, in order, that any frame of its stack matches (the frames are tried
from the root; the main thread's frames below trio's scheduler, `main` to `trio.run`, are
left out: they carry every task); none: OTHER. So the order says who owns work done on
another's behalf: the IPv4 plan a cable reconcile runs is IPv4's, the host setup it runs
is host care's, a lazy import anywhere is start-up's, the answer built for another node is
node info's even where it reads babeld's table.

The rules match babbler's modules by their path below `babbler/` (a folder: any module in
it) and, where a module serves several sources, by function. Entry points are named rather
than helpers shared by several sources (`answer.encode` serves both an answer and a push:
it goes with whichever called it).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

ASKS = "node info: asks (and pushes sent)"
ANSWERS = "node info: answers (and pushes taken)"
BOOK = "node info: book and view"
IPV4 = "IPv4 and collisions (clash check, cables)"
HOST = "host setup (hostcare)"
RECONCILE = "cable reconciles (links, addresses)"
LINES = "babeld lines (reader, table, control)"
CLIENTS = "client requests and fan-out"
IMPORTS = "start-up imports"
OTHER_BABBLER = "other babbler"
OTHER = "other (trio, stdlib)"


@dataclass(frozen=True)
class Rule:
    source: str
    # Paths below babbler/: a module ("daemon/mesh.py"), a folder ("daemon/links/"), or ""
    # for any of babbler's; none (with `functions`): a frame of any file, babbler's or not
    modules: tuple[str, ...] = ()
    functions: frozenset[str] = frozenset()  # empty: any function of those modules

    def matches(self, frame: Frame) -> bool:
        if self.functions and frame.function not in self.functions:
            return False
        if not self.modules:
            return True
        module = frame.module
        return module is not None and any(
            module.startswith(m) if m.endswith("/") or not m else module == m for m in self.modules
        )


IPV4_MODULES = (
    "daemon/ipv4_service.py", "daemon/ipv4.py", "daemon/farprobe.py", "core/ipv4.py",
    "daemon/moves.py", "daemon/identity.py", "core/collision.py",
)  # fmt: skip
HOST_MODULES = (
    "daemon/hostcare.py", "daemon/hostsetup.py", "daemon/sysctls.py", "daemon/fence_rules.py",
)  # fmt: skip
RECONCILE_MODULES = ("daemon/reconcile.py", "daemon/links/", "core/addrplan.py", "core/links.py")
LINES_MODULES = (
    "daemon/babeld/", "daemon/mesh.py", "daemon/linereader.py", "core/table.py",
    "core/babeld_lines.py", "core/readpolicy.py",
)  # fmt: skip
CLIENTS_MODULES = ("daemon/server.py", "daemon/requests.py", "daemon/fanout.py", "daemon/view.py")

RULES = (
    # every import, also a lazy one inside any other work (importlib's frames)
    Rule(IMPORTS, functions=frozenset({"_find_and_load", "_gcd_import"})),
    # the server's side: another node asked us, or pushed its info to us
    Rule(ANSWERS, ("daemon/nodes/server.py",)),
    Rule(ANSWERS, ("daemon/nodes/service.py",), frozenset({"_answer", "_take", "_serve"})),
    Rule(ANSWERS, ("daemon/view.py",), frozenset({"info_answer"})),
    # our side: we ask another node, or push ours to it
    Rule(ASKS, ("daemon/nodes/ask.py",)),
    Rule(ASKS, ("daemon/nodes/service.py",), frozenset({"_ask", "_push", "_pushes"})),
    # the rest of node info: the book, its view, the loop that follows the routes
    Rule(BOOK, ("daemon/nodes/",)),
    Rule(IPV4, IPV4_MODULES),
    Rule(HOST, HOST_MODULES),
    Rule(RECONCILE, RECONCILE_MODULES),
    Rule(LINES, LINES_MODULES),
    Rule(CLIENTS, CLIENTS_MODULES),
    Rule(OTHER_BABBLER, ("",)),
)
SOURCES = (
    ASKS,
    ANSWERS,
    BOOK,
    IPV4,
    HOST,
    RECONCILE,
    LINES,
    CLIENTS,
    IMPORTS,
    OTHER_BABBLER,
    OTHER,
)

FRAME = re.compile(r"(?P<function>.*?) \((?P<path>[^()]*?)(?::\d+)?\)")


@dataclass(frozen=True)
class Frame:
    function: str
    path: str

    @property
    def module(self) -> str | None:
        """The path below `babbler/` of one of babbler's modules (`daemon/mesh.py`); None
        for any other file (trio, the standard library, an installed package)."""
        if "site-packages/" in self.path or "babbler/" not in f"/{self.path}":
            return None
        return f"/{self.path}".rpartition("babbler/")[2]


def parse_frame(text: str) -> Frame:
    match = FRAME.fullmatch(text.strip())
    if match is None:
        return Frame(text.strip(), "")
    return Frame(match["function"], match["path"])


def parse_line(line: str) -> tuple[list[Frame], int] | None:
    """A collapsed line's frames (root first) and count; None for a line that is not one."""
    stack, _, count = line.strip().rpartition(" ")
    if not stack or not count.isdigit():
        return None
    return [parse_frame(f) for f in stack.split(";")], int(count)


def task_frames(frames: list[Frame]) -> list[Frame]:
    """The frames from trio's first on: those before it (babblerd's `main` down to
    `trio.run`) carry every task and are no task's work. A thread of ours has none."""
    for index, frame in enumerate(frames):
        if "/trio/" in f"/{frame.path}":
            return frames[index:]
    return frames


def classify(frames: list[Frame]) -> str:
    frames = task_frames(frames)
    for rule in RULES:
        if any(rule.matches(frame) for frame in frames):
            return rule.source
    return OTHER


def by_source(lines: Iterable[str]) -> dict[str, int]:
    """Samples per source (every source of SOURCES, 0 for none)."""
    counts = dict.fromkeys(SOURCES, 0)
    for line in lines:
        parsed = parse_line(line)
        if parsed is not None:
            frames, count = parsed
            counts[classify(frames)] += count
    return counts


def innermost(lines: Iterable[str]) -> Counter[str]:
    """Samples per innermost babbler function (`module function`; the stack's last frame
    when no babbler frame is in it): where to look inside a source."""
    counts: Counter[str] = Counter()
    for line in lines:
        parsed = parse_line(line)
        if parsed is None:
            continue
        frames, count = parsed
        ours = [f for f in frames if f.module is not None] or frames[-1:]
        last = ours[-1] if ours else Frame("?", "")
        counts[f"{last.module or last.path} {last.function}"] += count
    return counts
