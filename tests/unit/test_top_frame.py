"""`babblerctl top`'s frame: what fits in 80x24, busiest cable first, changes highlighted, a
peer's name shown as text (never rich markup, never escape codes); `--once` against a
stand-in babblerd."""

from __future__ import annotations

import dataclasses
import io
import subprocess
import sys
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from babbler.live.mesh import Live, MeshView, Rates, view
from babbler.live.top import FRESH, Poller, cells, frame, plain, rate_text, styled
from tests.fakes.babblerd_socket import fake_babblerd
from tests.unit.test_live_mesh import IDS, counters, ring_status

__all__ = ["fake_babblerd"]  # the fixture, used by name below

NAMES = ["n1", "n2", "n3", "n4"]


def busy_mesh() -> MeshView:
    """n1's view of a 4-ring, n2 sending 1 MB/s to n3 and n1 4 kB/s to n2."""
    live = Live()
    live.step(ring_status(NAMES), counters(IDS[1], 10.0, v1n=(0, 0), v1p=(0, 0)), 0.0)
    answer = counters(IDS[1], 11.0, v1n=(500, 1_000_000), v1p=(4000, 0))
    return live.step(ring_status(NAMES), answer, 1.0)


def text_of(mesh: MeshView, width: int = 80, height: int | None = 24) -> list[str]:
    return plain(frame(mesh, width=width, height=height, now=1.0)).splitlines()


def test_nodes_and_cables_busiest_first_in_80_columns() -> None:
    lines = text_of(busy_mesh())
    assert all(cells(line) <= 80 for line in lines)
    assert lines[0] == "babbler top: n1  4 of 4 nodes up, 4 cables"
    assert lines[1].split() == ["NODE", "ADDRESS", "IPV4", "HOPS", "STATE"]
    assert lines[2].split() == ["n1", "fde0::0:0", "10.77.0.0", "0", "me"]
    assert [line.split()[0] for line in lines[3:6]] == ["n2", "n3", "n4"]
    assert lines[6].split() == ["END", "A", "END", "B", "SPEED", "MTU", "A->B", "B->A"]
    assert lines[7].split() == ["n2", "v1n", "n3", "v2p", "1G", "1500", "8", "Mb/s", "4", "kb/s"]
    assert lines[8].split() == ["n1", "v0n", "n2", "v1p", "1G", "1500", "32", "kb/s", "0", "b/s"]
    assert lines[9].split()[-2:] == ["-", "-"]  # n3 and n4 not read yet: no rate
    assert len(lines) == 11


def test_the_hint_at_the_title_s_right_where_it_fits_and_a_problem_under_it() -> None:
    lines = frame(busy_mesh(), width=80, height=24, now=1.0, note="gone", hint="q quits")
    assert plain(lines).splitlines()[:2] == [
        "babbler top: n1  4 of 4 nodes up, 4 cables" + " " * 31 + "q quits",
        "gone",
    ]
    narrow = plain(frame(busy_mesh(), width=40, height=24, now=1.0, hint="q quits"))
    assert narrow.splitlines()[0] == "babbler top: n1  4 of 4 nodes up, 4 cab…"


def test_rates_in_bits_per_second() -> None:
    assert [rate_text(r) for r in (None, 0, 1, 100_000, 124_999_999, 1.25e9)] == [
        "-",
        "0 b/s",
        "8 b/s",
        "800 kb/s",
        "1 Gb/s",
        "10 Gb/s",
    ]


def big_ring(count: int) -> dict[str, Any]:
    """A node's status in a mesh of `count` nodes, each with a cable to the first."""
    status = ring_status(["me", "n1"])
    nodes = []
    for i in range(1, count):
        ident = f"{i:012x}"
        nodes.append(
            {
                "node_id": ident,
                "name": f"node-with-a-rather-long-name-{i}",
                "node_address": f"fde0:20c6:1fa7:ffff:{i:x}:bbbb:cccc:0",
                "node_address_v4": f"10.77.{i}.1",
                "reachable": True,
                "hops": 1,
                "cables": [{"interface": "eth0", "address": f"10.1.{i}.1", "peer": f"10.1.{i}.0"}],
                "links": [{"name": "eth0", "speed_mbps": 40000, "mtu": 9000}],
            }
        )
        status["addresses_v4"].append(
            {"interface": f"en{i}", "address": f"10.1.{i}.0", "peer": f"10.1.{i}.1"}
        )
    status["node_id"] = "000000000000"
    status["nodes"] = nodes
    return status


def test_what_does_not_fit_in_24_lines_is_counted() -> None:
    mesh = view(big_ring(30), Rates(), [])
    lines = text_of(mesh)
    assert len(lines) == 24 and all(cells(line) <= 80 for line in lines)
    nodes_more = next(line for line in lines if "more nodes" in line)
    cables_more = next(line for line in lines if "more cables" in line)
    shown_nodes = lines.index(nodes_more) - 2  # after the title and the heads
    shown_cables = lines.index(cables_more) - lines.index(nodes_more) - 2
    assert nodes_more == f"… {30 - shown_nodes} more nodes"
    assert cables_more == f"… {29 - shown_cables} more cables"
    assert lines[3].startswith("node-with-a-rather-") and "…" in lines[3].split()[0]  # cut
    assert len(text_of(mesh, height=None)) == 1 + 1 + 30 + 1 + 29  # --once: everything


def test_a_change_is_highlighted_and_listed() -> None:
    live = Live()
    live.step(ring_status(NAMES, down=frozenset({IDS[2]})), None, 0.0)
    mesh = live.step(ring_status(NAMES), None, 3.0)
    lines = frame(mesh, width=80, height=24, now=5.0)
    text = plain(lines).splitlines()
    n3 = next(i for i, line in enumerate(text) if line.startswith("n3 "))
    assert lines[n3][0][1] == FRESH
    assert sum(1 for line in lines if line[0][1] == FRESH) == 3  # n3 and its two cables
    assert text[-4:] == [
        "CHANGES (last 10 s)",
        "  2s ago  n3 joined",
        "  2s ago  cable n2 v1n - n3 v2p came",
        "  2s ago  cable n3 v2n - n4 v3p came",
    ]
    n2 = next(i for i, line in enumerate(text) if line.startswith("n2 "))
    assert lines[n2][0][1] == ""


HOSTILE = ["[bold red]x[/]", "[link=http://example.invalid]y[/link]", ":smile:", "a\x1b[2Jb"]


def hostile_mesh() -> MeshView:
    status = ring_status(["me", *HOSTILE])
    return view(status, Rates(), [])


def test_a_peer_name_is_text_never_markup() -> None:
    from rich.console import Console

    console = Console(file=io.StringIO(), width=80, force_terminal=True, record=True)
    console.print(styled(frame(hostile_mesh(), width=80, height=24, now=0.0)))
    shown = console.export_text()
    for name in HOSTILE[:3]:
        assert name in shown
    assert "a\\x1b[2Jb" in shown
    ansi = console.file.getvalue()  # type: ignore[attr-defined]
    assert "\x1b]8;" not in ansi  # no hyperlink made
    assert "\x1b[2J" not in ansi  # the name's escape was not passed on
    assert "😄" not in ansi


def test_once_prints_plain_text_with_rates_and_names_as_text(
    fake_babblerd: tuple[Path, dict[str, Any]],
) -> None:
    from babbler.ctl.main import main as babblerctl

    path, served = fake_babblerd
    served["status"] = ring_status(["me", "[bold]n2[/]", "n3"])
    readings = iter(range(0, 10_000_000, 125_000))

    def every_node_sending_125_kb_a_second() -> dict[str, Any]:
        sent = next(readings)
        links = {"v0n", "v0p", "v1n", "v1p", "v2n", "v2p"}
        answers = [counters(i, sent / 125_000, **dict.fromkeys(links, (sent, sent))) for i in IDS]
        return {"at": 0.0, "nodes": [a["nodes"][0] for a in answers[:3]]}

    served["counters"] = every_node_sending_125_kb_a_second
    done = CliRunner().invoke(babblerctl, ["top", "--once", "--socket", str(path)])
    assert done.exit_code == 0, done.output
    assert "\x1b" not in done.output
    lines = done.output.splitlines()
    assert lines[0] == "babbler top: me  3 of 3 nodes up, 3 cables"
    assert any(line.startswith("[bold]n2[/] ") for line in lines)
    cables = [line.split() for line in lines[6:]]
    assert [c[-4:] for c in cables] == [["1", "Mb/s", "1", "Mb/s"]] * 3
    assert len(lines) == 9


def test_once_says_when_babblerd_has_no_counters(
    fake_babblerd: tuple[Path, dict[str, Any]],
) -> None:
    from babbler.ctl.main import main as babblerctl

    path, served = fake_babblerd
    served["status"] = ring_status(["me", "n2", "n3"])
    done = CliRunner().invoke(babblerctl, ["top", "--once", "--socket", str(path)])
    assert done.exit_code == 0, done.output
    assert "this babblerd gives no counters: no rates" in done.output
    assert all(line.split()[-2:] == ["-", "-"] for line in done.output.splitlines()[7:10])


def test_a_counters_answer_it_cannot_read_is_asked_again_next_tick(
    fake_babblerd: tuple[Path, dict[str, Any]],
) -> None:
    path, served = fake_babblerd
    served["status"] = ring_status(["me", "n2", "n3"])
    poller = Poller(path)
    unreadable = {
        "not JSON": "`counters` answered something that is not JSON",
        "bad counters: asked too often": "babblerd said: bad counters: asked too often",
    }
    for line, said in unreadable.items():
        served["counters"] = line
        poller.poll(0.0)
        assert poller.problem == f"{said}; trying again every 1 s"
    for second in (1, 2):
        served["counters"] = counters(IDS[0], float(second), v0n=(0, 125 * second))
        poller.poll(float(second))
        assert poller.problem is None
    assert poller.mesh is not None
    assert [c.a_to_b for c in poller.mesh.cables if c.a.interface == "v0n"] == [125.0]


def test_an_older_babblerd_s_refusal_turns_rates_off_and_is_not_asked_again(
    fake_babblerd: tuple[Path, dict[str, Any]],
) -> None:
    path, served = fake_babblerd
    served["status"] = ring_status(["me", "n2", "n3"])
    poller = Poller(path)
    poller.poll(0.0)  # no answer for `counters` in the fake: `bad unknown request ...`
    assert poller.problem == "this babblerd gives no counters: no rates"
    served["counters"] = "not JSON"  # would be a problem line if it were asked
    poller.poll(1.0)
    assert poller.problem == "this babblerd gives no counters: no rates"


def test_a_cable_end_s_interface_is_shown_escaped() -> None:
    """status's cables reach the view only with names Linux allows (core/cablegraph.py's
    INTERFACE); the frame escapes them all the same, as it does every peer's text."""
    mesh = busy_mesh()
    cable = mesh.cables[0]
    shown = dataclasses.replace(cable, a=dataclasses.replace(cable.a, interface="e\x1b[2Jx"))
    lines = text_of(dataclasses.replace(mesh, cables=[shown]))
    assert lines[7].split()[:4] == ["n2", "e\\x1b[2Jx", "n3", "v2p"]


def test_once_survives_answers_of_the_wrong_shape(
    fake_babblerd: tuple[Path, dict[str, Any]],
) -> None:
    from babbler.ctl.main import main as babblerctl

    path, served = fake_babblerd
    status = ring_status(["me", "n2", "n3"])
    status["nodes"] += [None, 7, {"node_id": ["x"]}, {"node_id": "0000000000ff", "hops": "2"}]
    status["nodes"][0].update(name=["n2"], links="x", cables=[{"interface": "../x"}])
    served.update(status=status, counters=[1, 2])
    done = CliRunner().invoke(babblerctl, ["top", "--once", "--socket", str(path)])
    assert done.exit_code == 0, done.output
    assert "00000000000b" in done.output  # n2's name was no text: its id stands for it
    served["status"] = [status]
    done = CliRunner().invoke(babblerctl, ["top", "--once", "--socket", str(path)])
    assert done.exit_code == 1
    assert done.output == f"babblerctl top: `status` answered no node's status ({path})\n"


def test_without_babblerd_one_line_and_exit_1(tmp_path: Path) -> None:
    from babbler.ctl.main import main as babblerctl

    done = CliRunner().invoke(babblerctl, ["top", "--socket", str(tmp_path / "none.sock")])
    assert done.exit_code == 1
    assert done.output.count("\n") == 1
    assert done.output.startswith("babblerctl top: babblerd is not running")


def test_babblerctl_does_not_import_rich() -> None:
    code = "import babbler.ctl.main, babbler.live.top, sys; assert 'rich' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


@given(st.integers(1, 40), st.integers(10, 200), st.integers(3, 60), st.booleans())
def test_any_frame_fits_its_terminal(count: int, width: int, height: int, changed: bool) -> None:
    live = Live()
    live.step(big_ring(count), None, 0.0)
    mesh = live.step(big_ring(count + 1 if changed else count), None, 1.0)
    lines = frame(mesh, width=width, height=height, now=2.0, note="a problem", hint="q quits")
    assert len(lines) <= height
    assert all(cells("".join(text for text, _ in line)) <= width for line in lines)
