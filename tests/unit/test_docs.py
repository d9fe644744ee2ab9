"""What docs/operations.md says about the settings and the host is what the code does."""

from __future__ import annotations

import re
from pathlib import Path

from babbler.core.config import SETTINGS
from babbler.daemon.hostsetup import CANDIDATE_LINK, FORWARDING, IPV4_LINK, MESH_LINK

OPERATIONS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"


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
