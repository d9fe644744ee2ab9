"""The module map in docs/design.md is true: every row is well formed, every module has a
row, every import of a babbler module (lazy, type-checking, relative and `importlib` ones too)
is one its row names and every name a row gives is imported, pure modules stay pure, and every
path named in README.md and the text files under docs/ exists."""

from __future__ import annotations

import ast
import functools
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


# A row: `path` | yes or no | its concern | `name`, `name`, ... or (nothing)
ROW = re.compile(
    r"\| `([\w./]+)` \| (yes|no) \| [^|]+ \| ((?:`[\w.]+`(?:, `[\w.]+`)*)|\(nothing\)) \|"
)


def map_section() -> str:
    text = DESIGN.read_text()
    section = text[text.index("## Module map") :]
    return section[: section.index("\n## ", 3)]


def parse_rows(section: str) -> list[Row]:
    """The table's rows; a line of the table that is not a row is an AssertionError naming
    it (a row skipped would let its modules fall under a folder row unseen)."""
    table = [line.strip() for line in section.splitlines() if line.strip().startswith("|")]
    out = []
    for line in table[2:]:  # after the header and its |---| line
        match = ROW.fullmatch(line)
        assert match, (
            f"docs/design.md, module map: malformed row {line!r}; write "
            "| `path` | yes or no | its concern | `name`, `name` or (nothing) |"
        )
        path, pure, may = match.groups()
        out.append(Row(path, pure == "yes", frozenset(re.findall(r"`([\w.]+)`", may))))
    return out


@functools.cache
def rows() -> list[Row]:
    return parse_rows(map_section())


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


def _absolute(module: str, node: ast.ImportFrom) -> str:
    """The dotted name an ImportFrom reads from, `babbler.` included; relative ones resolved
    from `module` (babbler's dotted name, without the prefix)."""
    if node.level == 0:
        return node.module or ""
    package = f"babbler.{module}" if module != "babbler" else "babbler"
    if MODULES[module].name != "__init__.py":
        package = package.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


def _loaded_by_name(node: ast.Call) -> str | None:
    """`importlib.import_module("x")`, `import_module("x")`, `__import__("x")`: "x"."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if name not in ("import_module", "__import__") or not node.args:
        return None
    first = node.args[0]
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None


def imports(module: str) -> set[tuple[str, int]]:
    """Every module `module` imports anywhere (babbler's as dotted names without the
    `babbler.` prefix, others as their top-level name), with the line."""
    tree = ast.parse(MODULES[module].read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.add((alias.name, node.lineno))
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(module, node)
            for alias in node.names:  # `from babbler.x import y`: y may be a module
                inner = f"{source}.{alias.name}".removeprefix("babbler.")
                found.add((f"{source}.{alias.name}" if inner in MODULES else source, node.lineno))
        elif isinstance(node, ast.Call) and (name := _loaded_by_name(node)) is not None:
            found.add((name, node.lineno))
    out = set()
    for name, line in found:
        if name == "babbler" or name.startswith("babbler."):
            inner = name.removeprefix("babbler").removeprefix(".") or "babbler"
            if inner in MODULES:
                out.add((inner, line))
        else:
            out.add((name.split(".")[0], line))
    return out


def own_folder(module: str, row: Row) -> bool:
    """Whether `module` is in the folder `row` names (a folder row's modules import each
    other freely)."""
    if not row.path.endswith("/"):
        return False
    folder = row.path.rstrip("/").replace("/", ".")
    return module == folder or module.startswith(folder + ".")


def allowed(module: str, target: str, row: Row) -> bool:
    return target == module or own_folder(target, row) or target in row.may


@pytest.mark.parametrize(
    "line",
    [
        "| `core/x.py` | maybe | a concern | (nothing) |",  # pure is yes or no
        "| core/x.py | yes | a concern | (nothing) |",  # the path in backticks
        "| `core/x.py` | yes | a concern | core.table |",  # names in backticks
        "| `core/x.py` | yes | a concern |",  # a cell short
        "| `core/x.py` | yes | a concern | `core.table`; `core.links` |",
    ],
)
def test_a_malformed_row_is_refused_not_skipped(line: str) -> None:
    table = "| path | pure | concern | may import |\n|---|---|---|---|\n"
    assert parse_rows(table + "| `core/y.py` | no | a concern | `core.table` |\n")
    with pytest.raises(AssertionError, match="malformed row"):
        parse_rows(table + line + "\n")


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
    for target, line in sorted(imports(module)):
        where = f"babbler/{MODULES[module].relative_to(PACKAGE)}:{line}"
        if target in MODULES:
            assert allowed(module, target, row), (
                f"{where} imports {target}: add `{target}` to the row `{row.path}`"
                " of docs/design.md"
            )
            if row.pure:
                assert target in pure_rows, f"{where}: pure, imports {target}, which is not"
        elif row.pure:
            assert target not in IMPURE, f"{where}: pure, imports {target}"


def imported_by_row(row: Row, table: list[Row]) -> set[str]:
    """The babbler modules that the modules under `row` import, their own folder's aside."""
    return {
        target
        for module in MODULES
        if row_of(module, table) == row
        for target, _ in imports(module)
        if target in MODULES and target != module and not own_folder(target, row)
    }


def test_a_row_names_only_what_its_modules_import() -> None:
    table = rows()
    unused = []
    for row in table:
        used = imported_by_row(row, table)
        for name in sorted(row.may - used):
            listed = ", ".join(f"`{n}`" for n in sorted(used)) or "(nothing)"
            unused.append(
                f"row `{row.path}`: `{name}` is imported by none of its modules "
                f"(they import: {listed}): drop it"
            )
    assert not unused, "docs/design.md, module map:\n" + "\n".join(unused)


def test_every_path_docs_name_exists() -> None:
    pattern = re.compile(r"(?<![\w/.-])((?:" + "|".join(TOP_DIRS) + r")/[\w./-]*[\w/])")
    missing = []
    for doc in [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").rglob("*") if p.is_file())]:
        try:  # every text file: the pages, the schemas, the pictures' SVG
            text = doc.read_text()
        except UnicodeDecodeError:  # a PNG says no paths a reader could follow
            continue
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
    graph = {m: {t for t, _ in imports(m) if t in MODULES and t != m} for m in MODULES}
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


def test_babblerctl_reaches_no_daemon_module() -> None:
    """babblerctl runs without the daemon: no module it imports, however far down, is one of
    babblerd's (what both need is in `core/` or `host/`)."""
    reached: dict[str, str] = {}  # module -> the one that imports it
    todo = [m for m in MODULES if m == "ctl" or m.startswith("ctl.")]
    while todo:
        module = todo.pop()
        for target, _ in imports(module):
            if target in MODULES and target not in reached:
                reached[target] = module
                todo.append(target)
    daemon = sorted(t for t in reached if t == "daemon" or t.startswith("daemon."))
    assert not daemon, ", ".join(f"{reached[t]} imports {t}" for t in daemon) + (
        ": move what both need into core/ (pure) or host/"
    )
