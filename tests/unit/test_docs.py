"""What the docs say is what the code does: the reload list and the host settings of
docs/operations.md, and what the macOS test inputs are."""

from __future__ import annotations

import re
from pathlib import Path

from babbler.core.config import SETTINGS
from babbler.daemon.hostsetup import CANDIDATE_LINK, FORWARDING, IPV4_LINK, MESH_LINK

ROOT = Path(__file__).resolve().parents[2]
OPERATIONS = ROOT / "docs" / "operations.md"
# The macOS outputs the tests use were typed in macOS's format, never captured on a Mac
# (tests/unit/data/darwin/README.md): calling them recorded claims what nobody did.
RECORDED_OUTPUTS = re.compile(r"recorded (command )?(outputs?|answers)", re.IGNORECASE)


def test_the_reload_list_is_the_reloadable_settings() -> None:
    text = " ".join(OPERATIONS.read_text().split())
    match = re.search(r"`SIGHUP` re-reads the file: (.*?) take effect at once", text)
    assert match, "docs/operations.md: the sentence `SIGHUP` re-reads the file: ... is gone"
    said = set(re.findall(r"`([\w-]+)`", match.group(1)))
    reloadable = {s.key for s in SETTINGS if s.reloadable}
    assert said == reloadable, (
        f"docs/operations.md, SIGHUP: add {sorted(reloadable - said)}, "
        f"drop {sorted(said - reloadable)} (core/config.py SETTINGS, reloadable)"
    )


def test_every_sysctl_babblerd_sets_on_linux_is_in_the_docs() -> None:
    text = OPERATIONS.read_text()
    start = text.index("## What babblerd changes on the host")
    section = text[start : text.index("\n## ", start + 3)]
    keys = [FORWARDING] + [key for key, _ in MESH_LINK + IPV4_LINK + CANDIDATE_LINK]
    missing = sorted({k.rsplit("/", 1)[1] for k in keys} - set(re.findall(r"\w+", section)))
    assert not missing, f"docs/operations.md, What babblerd changes on the host: add {missing}"


def test_no_hand_typed_output_is_called_recorded() -> None:
    files = [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]
    files += [*(ROOT / "babbler").rglob("*.py"), *(ROOT / "tests").rglob("*.py")]
    said = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sorted(files)
        if path != Path(__file__)
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if RECORDED_OUTPUTS.search(line)
    ]
    assert not said, f"say transcribed, not recorded: {said}"
