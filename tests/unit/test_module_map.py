"""The module map in docs/design.md is true: every module has a row, every import of a
babbler module (lazy and type-checking ones too) is one its row allows, pure modules stay
pure, and every path docs/ names exists."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "babbler"
DESIGN = ROOT / "docs" / "design.md"
# What a pure module must not import: the ways to reach the kernel, files, processes, clocks
# that run on their own, the network and the log.
IMPURE = {
    "anyio", "asyncio", "click", "ctypes", "fcntl", "netifaces", "os", "pyroute2", "select",
    "selectors", "shutil", "signal", "socket", "structlog", "subprocess", "threading", "trio",
    "time",
}  # fmt: skip
TOP_DIRS = ("babbler", "bench", "tests", "docs", "scripts", "systemd", "launchd", "nix", "examples")


@dataclass(frozen=True)
class Row:
    path: str  # under babbler/: a module ("core/table.py") or a folder ("client/")
    pure: bool
    may: frozenset[str]  # dotted names: modules ("core.table") or folders ("client")


def rows() -> list[Row]:
    text = DESIGN.read_text()
    section = text[text.index("## Module map") :]
    section = section[: section.index("\n## ", 3)]
    out = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[0].startswith("`"):
            continue
        may = frozenset(re.findall(r"`([\w.]+)`", cells[3]))
        out.append(Row(cells[0].strip("`"), cells[1] == "yes", may))
    return out


def dotted(path: Path) -> str:
    """babbler/core/table.py -> core.table; babbler/client/__init__.py -> client."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts) or "babbler"


MODULES = {dotted(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def row_of(module: str, table: list[Row]) -> Row | None:
    """The module's own row, else the row of the nearest folder that holds it."""
    path = MODULES[module].relative_to(PACKAGE).as_posix()
    best = None
    for row in table:
        if row.path == path:
            return row
        inside = row.path.endswith("/") and path.startswith(row.path)
        if inside and (best is None or len(row.path) > len(best.path)):
            best = row
    return best


def imports(path: Path) -> set[tuple[str, int]]:
    """Every module `path` imports anywhere (babbler's as dotted names without the
    `babbler.` prefix, others as their top-level name), with the line."""
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.add((alias.name, node.lineno))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:  # `from babbler.x import y`: y may be a module
                inner = f"{node.module}.{alias.name}".removeprefix("babbler.")
                found.add(
                    (
                        f"{node.module}.{alias.name}" if inner in MODULES else node.module,
                        node.lineno,
                    )
                )
    out = set()
    for name, line in found:
        if name == "babbler" or name.startswith("babbler."):
            inner = name.removeprefix("babbler").removeprefix(".") or "babbler"
            if inner in MODULES:
                out.add((inner, line))
        else:
            out.add((name.split(".")[0], line))
    return out


def allowed(module: str, target: str, row: Row) -> bool:
    if target == module:
        return True
    if row.path.endswith("/"):
        folder = row.path.rstrip("/").replace("/", ".")
        if target == folder or target.startswith(folder + "."):
            return True
    return any(target == name or target.startswith(name + ".") for name in row.may)


def test_every_row_names_a_module_or_folder_that_exists() -> None:
    for row in rows():
        assert (PACKAGE / row.path).exists(), f"docs/design.md names babbler/{row.path}"
        for name in row.may:
            assert name in MODULES, f"row {row.path}: no module babbler.{name}"


def test_every_module_has_a_row() -> None:
    table = rows()
    missing = [m for m in MODULES if row_of(m, table) is None]
    assert not missing, f"modules without a row in docs/design.md: {missing}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_follow_the_map(module: str) -> None:
    table = rows()
    row = row_of(module, table)
    assert row is not None
    pure_rows = {m for m in MODULES if (r := row_of(m, table)) is not None and r.pure}
    for target, line in sorted(imports(MODULES[module])):
        where = f"babbler/{MODULES[module].relative_to(PACKAGE)}:{line}"
        if target in MODULES:
            assert allowed(module, target, row), f"{where} imports {target}: not in its row"
            if row.pure:
                assert target in pure_rows, f"{where}: pure, imports {target}, which is not"
        elif row.pure:
            assert target not in IMPURE, f"{where}: pure, imports {target}"


def test_every_path_docs_name_exists() -> None:
    pattern = re.compile(r"(?<![\w/.-])((?:" + "|".join(TOP_DIRS) + r")/[\w./-]*[\w/])")
    missing = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = doc.read_text()
        if doc == DESIGN:  # the map's rows are paths under babbler/, checked above
            start = text.index("## Module map")
            text = text[:start] + text[text.index("\n## ", start + 3) :]
        for match in pattern.finditer(text):
            path = match.group(1)
            if re.search(r"[A-Z]{3,}", path):  # a placeholder: bench/results/NAME.json
                continue
            if not (ROOT / path).exists():
                missing.append(f"{doc.relative_to(ROOT)}: {path}")
    assert not missing, "paths named in the docs that do not exist:\n" + "\n".join(missing)


def test_no_module_reaches_itself_through_its_imports() -> None:
    """No import cycle, lazy ones included (a lazy cycle hides a second way in)."""
    graph = {m: {t for t, _ in imports(p) if t in MODULES and t != m} for m, p in MODULES.items()}
    for package in [m for m in MODULES if MODULES[m].name == "__init__.py"]:
        # a package's __init__ naming its own modules is how packages are, not a cycle
        graph[package] = {t for t in graph[package] if not t.startswith(package + ".")}
    cycles = []
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            cycles.append(" -> ".join([*path[path.index(module) :], module]))
            return
        if module in done:
            return
        for target in sorted(graph[module]):
            visit(target, [*path, module])
        done.add(module)

    for module in sorted(graph):
        visit(module, [])
    assert not cycles, "import cycles:\n" + "\n".join(cycles)
