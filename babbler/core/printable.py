"""Text from other machines made safe to show (pure): what a terminal would act on instead
of printing is written as a visible escape.

A peer's name, version, `[info]` fields and link names reach `babblerctl`'s tables, `watch`
lines, the doctor, warnings on stderr and Graphviz labels. A terminal acts on control
characters (ESC starts sequences that clear the screen, move the cursor, set the window
title; a newline fakes a table row), bidi and other format characters reorder or hide what
follows, and a lone surrogate cannot be written at all. Node info refuses them on arrival
(daemon/nodes/checked.py); every renderer escapes them too, since an older babblerd's status
passes through the same renderers.
"""

from __future__ import annotations

import unicodedata

# Unicode categories a terminal may act on instead of showing: controls (C0, DEL, C1),
# format characters (bidi embeddings, overrides and isolates, zero-width ones), surrogates,
# and the line and paragraph separators some terminals and editors break lines at.
UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def unsafe(char: str) -> bool:
    """Whether one character is one a terminal may act on (UNSAFE_CATEGORIES)."""
    return unicodedata.category(char) in UNSAFE_CATEGORIES


def first_unsafe(text: str) -> str | None:
    """The first unsafe character of `text`, or None."""
    if text.isprintable():  # stricter than `unsafe`: the common case in one call
        return None
    return next((c for c in text if unsafe(c)), None)


def codepoint(char: str) -> str:
    """A character as people name it in an error: U+001B."""
    return f"U+{ord(char):04X}"


def _escape(char: str) -> str:
    if char in SHORT:
        return SHORT[char]
    point = ord(char)
    if point < 0x100:
        return f"\\x{point:02x}"
    return f"\\u{point:04x}" if point < 0x10000 else f"\\U{point:08x}"


def escape(text: str) -> str:
    """`text` with every unsafe character written as a visible escape (`\\x1b`, `\\n`,
    `\\u202e`), the rest as it is: one line a terminal prints and does nothing else with."""
    if text.isprintable():
        return text
    return "".join(_escape(c) if unsafe(c) else c for c in text)
