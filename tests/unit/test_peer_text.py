"""A peer's text never reaches a terminal raw: a name that would clear the screen, set the
window title, reorder text or fake a table row is shown escaped, one line where it was one,
in every output people read (tables, watch, doctor, DOT, errors and warnings)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from babbler.client.model import NodeEvent, Snapshot, parse_node
from babbler.core.errors import BabblerError
from babbler.core.graph import Graph, to_dot
from babbler.core.printable import escape, first_unsafe
from babbler.ui.command import run_command
from babbler.ui.doctor import Facts, checks, render_checks
from babbler.ui.render import render_nodes, render_path, render_status
from babbler.ui.watchview import WatchView
from tests.fakes.babblerd_socket import fake_babblerd
from tests.unit.samples import NODE_ENTRY, STATUS, typed

__all__ = ["fake_babblerd"]  # the fixture, used by name below

# Clear the screen, set the window title, a row of its own, then a right-to-left override.
EVIL = "\x1b[2J\x1b]0;pwned\x07n9\n  n10  fe80::1  fake row\u202e"
SHOWN = "\\x1b[2J\\x1b]0;pwned\\x07n9\\n  n10  fe80::1  fake row\\u202e"


def clean(text: str) -> str:
    """`text`, asserted free of anything a terminal acts on (its own line breaks aside)."""
    for line in text.split("\n"):
        assert first_unsafe(line) is None, repr(line)
    return text


def status(name: str, reachable: bool = True) -> dict[str, Any]:
    """This node (n1) and n2, named `name`, cabled to it on eth1; n2's link eth9."""
    node = {
        **NODE_ENTRY,
        "node_id": "000000000002",
        "name": name,
        "version": name,
        "reachable": reachable,
        "info": {"role": name},
        "neighbours": [{"node_id": STATUS["node_id"], "interface": "eth9"}],
        "links": [{"name": "eth9", "cost": 32, "mtu": 9000}],
        "cables": [{"interface": "eth9", "address": "10.77.168.99", "peer": "10.77.168.98"}],
    }
    neighbour = {"address": "fe80::2", "interface": "eth1", "node_id": "000000000002"}
    return {**STATUS, "nodes": [node], "neighbours": [neighbour]}


def test_the_escape_is_visible_and_keeps_the_rest() -> None:
    assert escape(EVIL) == SHOWN
    assert escape("n1 — Zoë 🚀") == "n1 — Zoë 🚀"  # printable text as it is
    assert escape(escape(EVIL)) == escape(EVIL)  # escaping twice changes nothing more
    assert escape("\ud800\u2028\x9b") == "\\ud800\\u2028\\x9b"  # a surrogate, LS, C1 CSI


def test_status_and_nodes_tables_show_a_peer_name_escaped_in_its_own_row() -> None:
    plain, evil = typed(status("n2")), typed(status(EVIL))
    for render in (render_status, lambda s: "\n".join(render_nodes(s))):
        text = clean(render(evil))
        assert SHOWN in text
        assert len(text.splitlines()) == len(render(plain).splitlines())  # no fake row


def test_the_path_shows_a_peer_name_escaped() -> None:
    text = clean(render_path(typed(status(EVIL)), "000000000002"))
    assert SHOWN in text and len(text.splitlines()) == 2


def test_watch_lines_show_a_peer_name_escaped() -> None:
    view = WatchView()
    view.lines(Snapshot(typed(status("n2"))))
    node = parse_node({**typed(status(EVIL)).raw["nodes"][0], "interface": "eth2"})
    (line,) = view.lines(NodeEvent("changed", node))
    assert clean(line) == f"{SHOWN} now via eth2 (metric 32), 1 hops"


def test_the_doctor_shows_a_peer_name_escaped() -> None:
    value = typed(status(EVIL))
    value = typed({**value.raw, "interfaces": [{"name": "eth1", "mtu": 1500}]})
    found = checks(Facts(platform="Linux", root=True, socket="s", status=value))
    mtu = clean(render_checks(found)).splitlines()
    assert any(f"against {SHOWN}'s eth9 9000" in line for line in mtu)


def test_a_dot_label_shows_a_peer_name_escaped() -> None:
    dot = clean(to_dot(Graph.from_status(typed(status(EVIL)).raw)))
    assert f'label="{SHOWN.replace(chr(92), chr(92) * 2)}\\n000000000002"' in dot


def test_an_error_naming_a_peer_is_one_escaped_line(capsys: pytest.CaptureFixture[str]) -> None:
    def fail() -> None:
        raise BabblerError(f"{EVIL} is not reachable now")

    with pytest.raises(SystemExit):
        run_command("babblerctl", fail)
    assert clean(capsys.readouterr().err) == f"babblerctl: {SHOWN} is not reachable now\n"


def test_babblerctl_escapes_a_peer_name_in_tables_and_warnings(
    fake_babblerd: tuple[Path, dict[str, Any]],
) -> None:
    from babbler.ctl.main import main as babblerctl

    path, served = fake_babblerd
    value = status("n2")
    value["nodes"].append({**value["nodes"][0], "node_id": "000000000003", "name": EVIL})
    value["nodes"][1] |= {"reachable": False, "node_address_v4": f"10.77.0.3{EVIL}"}
    served["status"] = typed(value).raw
    runner = CliRunner()
    torch = runner.invoke(babblerctl, ["--socket", str(path), "hostfile", "--format", "torch"])
    assert torch.exit_code == 0, torch.output
    assert clean(torch.stderr) == (
        f"babblerctl: warning: left out, not reachable or not answering: {SHOWN}\n"
    )
    nodes = runner.invoke(babblerctl, ["--socket", str(path), "nodes"])
    assert SHOWN in clean(nodes.stdout) and len(nodes.stdout.splitlines()) == 4
    far = runner.invoke(babblerctl, ["--socket", str(path), "ip", "-4", "000000000003"])
    assert far.exit_code == 0 and clean(far.stdout) == f"10.77.0.3{SHOWN}\n"  # an old babblerd
