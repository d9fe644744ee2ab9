"""The lab finds babblerd's bench responder by the module babblerd runs it as: the lab may
not import the daemon's responder module (docs/design.md), so it names the program itself,
and the two must agree for `babbler-lab stop` to end a responder a killed babblerd left."""

from __future__ import annotations

from babbler.daemon import responder
from babbler.lab.processes import RESPONDER


def test_the_lab_names_the_responder_as_babblerd_runs_it() -> None:
    assert RESPONDER == responder.PROGRAM
    assert RESPONDER in " ".join(responder.command("fde0::1", 6699))
