"""The Python snippets of the pages a newcomer reads first (README.md, docs/client.md), for
tests that compile them and run them against a lab node: a snippet is copied and run as it
stands, so it must work as it stands."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = (ROOT / "README.md", ROOT / "docs" / "client.md")
EXAMPLE = ROOT / "examples" / "watch_nodes.py"
FENCED = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def python_snippets() -> list[tuple[str, str]]:
    """(page:line, code) of every ```python block of the pages."""
    found = []
    for page in PAGES:
        text = page.read_text()
        for match in FENCED.finditer(text):
            line = text.count("\n", 0, match.start()) + 2
            found.append((f"{page.relative_to(ROOT)}:{line}", match.group(1)))
    return found
