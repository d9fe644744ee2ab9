"""babblerd's command line without click, for the start-up path (docs/design.md "Early
start"): click and what it imports cost 12 ms of a start that babeld waits for.

Only a plain, well-formed command line is read here (`--key value`, `--key=value`, switches,
repeated options): the same flags click would give, or None when anything else is on it
(help, version, a short or unknown option, an operand, a word that is not a choice, a
missing value). None hands the whole line to click (cli_command.py), which explains or
rejects it as it always did. A test holds the two to the same answers.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from babbler.core.config import BY_KEY

CONFIG_FLAG = "--config"
# babblerd's subcommands (babbler/service/command.py), routed before anything else is read.
SUBCOMMANDS = ("install-system-daemon", "uninstall-system-daemon", "system-daemon-status")


Flags = dict[str, str | bool | tuple[str, ...]]


def parse(argv: Sequence[str]) -> tuple[Path | None, Flags] | None:
    """(--config path or None, {setting key: value}) as click would parse `argv`, or None."""
    config: Path | None = None
    flags: Flags = {}
    repeated: dict[str, tuple[str, ...]] = {}
    tokens = iter(argv)
    for token in tokens:
        name, has_value, inline = token.partition("=")
        setting = BY_KEY.get(name[2:]) if name.startswith("--") else None
        if name != CONFIG_FLAG and setting is None:
            return None  # help, version, "--", an operand, a typo: click's to answer
        if setting is not None and setting.switch:
            if has_value:
                return None
            flags[setting.key] = True
            continue
        value = inline if has_value else next(tokens, None)
        if value is None:
            return None
        if setting is None:  # --config: click.Path(dir_okay=False)
            if not value or Path(value).is_dir():
                return None
            config = Path(value)
        elif setting.choices:
            word = _choice(value, setting.choices)
            if word is None:
                return None
            flags[setting.key] = word
        elif setting.repeatable:
            repeated[setting.key] = (*repeated.get(setting.key, ()), value)
        else:
            flags[setting.key] = value
    return config, flags | repeated


def _choice(value: str, choices: tuple[str, ...]) -> str | None:
    """The choice `value` names, ignoring case (click.Choice(case_sensitive=False))."""
    for choice in choices:
        if choice.casefold() == value.casefold():
            return choice
    return None
