"""`babblerctl top` on a real lab: `--once` lists every node and cable of a 4-ring and, with
traffic over one cable, that cable first with its rate; in a real 80x24 terminal (tmux) it
draws the frame, says when babblerd goes away, and `q` or SIGTERM give the terminal back."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from babbler.lab import Lab, Node
from babbler.live.mesh import Rates, view
from tests.integration.helpers import WAIT, LabFactory, until
from tests.needs import tool

CTL = str(Path(sys.executable).with_name("babblerctl"))
RATE_UNITS = {"b/s": 1.0, "kb/s": 1e3, "Mb/s": 1e6, "Gb/s": 1e9}


def ring(make_lab: LabFactory, count: int) -> Lab:
    """A ring whose every cable n1 sees (both ends' node info came)."""
    lab = make_lab(count, "ring")
    lab.wait_reachable(WAIT)
    n1 = lab.nodes[0]
    until(lambda: len(view(lab.status(n1), Rates(), []).cables) == count, what="every cable")
    return lab


def top_once(lab: Lab, node: Node) -> list[str]:
    done = lab.exec(node, CTL, "top", "--once", "--socket", str(node.socket))
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout
    return done.stdout.splitlines()


def cable_rows(lines: list[str]) -> list[list[str]]:
    """The cables' rows: from the header to the changes' section, if any."""
    head = next(i for i, line in enumerate(lines) if line.startswith("END A"))
    rows = []
    for line in lines[head + 1 :]:
        if line.startswith("CHANGES"):
            break
        if line and not line.startswith("…"):
            rows.append(line.split())
    return rows


def bits(value: str, unit: str) -> float:
    return float(value) * RATE_UNITS[unit]


def test_once_lists_every_node_and_cable_and_the_busy_cable_first(make_lab: LabFactory) -> None:
    lab = ring(make_lab, 4)
    n1, n2, _, _ = lab.nodes
    lines = top_once(lab, n1)
    assert lines[0] == "babbler top: n1  4 of 4 nodes up, 4 cables"
    nodes = [line.split() for line in lines[2:6]]
    assert [(n[0], n[-2], n[-1]) for n in nodes] == [
        ("n1", "0", "me"),
        ("n2", "1", "up"),
        ("n3", "2", "up"),
        ("n4", "1", "up"),
    ]
    ends = {(r[0], r[1], r[2], r[3]) for r in cable_rows(lines)}
    wanted = {(f"n{a}", lab.end_name(a, b), f"n{b}", lab.end_name(b, a)) for a, b in lab.links}
    assert {tuple(sorted([e[:2], e[2:]])) for e in ends} == {
        tuple(sorted([e[:2], e[2:]])) for e in wanted
    }

    # 100 pings a second of 1000 bytes from n2 to n3 over their cable (its /31 peer address)
    peer = next(a["peer"] for a in lab.status(n2)["addresses_v4"] if a["interface"] == "v2x3")
    ping = ["ping", "-q", "-s", "1000", "-i", "0.01", "-c", "800", peer]
    with subprocess.Popen(["ip", "netns", "exec", n2.netns, *ping], stdout=subprocess.DEVNULL):
        time.sleep(1.5)
        lines = top_once(lab, n1)
    first = cable_rows(lines)[0]
    assert {tuple(first[:2]), tuple(first[2:4])} == {("n2", "v2x3"), ("n3", "v3x2")}, lines
    sent, back = bits(*first[-4:-2]), bits(*first[-2:])
    assert sent > 300e3 and back > 300e3, lines  # about 830 kb/s each way
    for other in cable_rows(lines)[1:]:
        assert bits(*other[-4:-2]) < sent / 10 and bits(*other[-2:]) < back / 10, lines


@contextmanager
def pane(name: str, command: str) -> Iterator[str]:
    """A detached tmux session of 80x24 running `command` (sh), killed at the end."""
    tmux = tool("tmux", "tmux")
    session = f"top-{name}"
    env = {**os.environ, "TERM": "xterm-256color"}
    env.pop("TMUX", None)
    subprocess.run(
        [tmux, "new-session", "-d", "-x", "80", "-y", "24", "-s", session, command],
        check=True,
        env=env,
    )
    try:
        yield session
    finally:
        subprocess.run([tmux, "kill-session", "-t", session], check=False)


def screen(session: str) -> list[str]:
    done = subprocess.run(
        ["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True, check=True
    )
    return done.stdout.splitlines()


def seen(session: str, text: str, timeout: float = 20.0) -> list[str]:
    until(lambda: any(text in line for line in screen(session)), timeout, f"{text!r} shown")
    return screen(session)


def test_a_real_terminal_draws_the_frame_and_gets_its_settings_back(
    make_lab: LabFactory, tmp_path: Path
) -> None:
    lab = ring(make_lab, 4)
    n1 = lab.nodes[0]
    pid_file, after = tmp_path / "top.pid", tmp_path / "stty"
    top = shlex.join(["ip", "netns", "exec", n1.netns, CTL, "top", "--socket", str(n1.socket)])
    inner = f"echo $$ > {pid_file}; exec {top}"
    script = (
        f"sh -c {shlex.quote(inner)}; stty -a > {after}.part; mv {after}.part {after}; sleep 600"
    )

    with pane(lab.name, script) as session:
        shown = seen(session, "babbler top: n1")
        assert shown[0].startswith("babbler top: n1  4 of 4 nodes up, 4 cables"), shown
        assert any(line.startswith("n4 ") for line in shown)
        assert max(len(line) for line in shown) <= 80
        resize = ["tmux", "resize-window", "-t", session, "-x", "60", "-y", "8"]
        subprocess.run(resize, check=True)  # the frame follows the terminal
        until(lambda: any(line.startswith("… ") for line in screen(session)), 20, "cut to fit")
        assert max(len(line.rstrip()) for line in screen(session)) <= 60
        lab.stop(n1)  # babblerd goes away: top says so and keeps the last frame
        shown = seen(session, "babblerd is not running")
        assert shown[0].startswith("babbler top: n1"), shown
        subprocess.run(["tmux", "send-keys", "-t", session, "q"], check=True)
        until(after.exists, 20, "top ended on q")
        settings = after.read_text().split()
        assert "echo" in settings and "icanon" in settings, settings
        assert not any("babbler top" in line for line in screen(session))  # the screen back

    lab.start(n1)
    lab.wait_served(n1)
    for way_out in ("C-c", "SIGTERM"):  # the terminal is given back on these too
        after.unlink()
        with pane(f"{lab.name}{way_out}", script) as session:
            seen(session, "babbler top: n1")
            if way_out == "SIGTERM":
                os.kill(int(pid_file.read_text()), signal.SIGTERM)
            else:
                subprocess.run(["tmux", "send-keys", "-t", session, way_out], check=True)
            until(after.exists, 20, f"top ended on {way_out}")
            settings = after.read_text().split()
            assert "echo" in settings and "icanon" in settings, (way_out, settings)
            assert not any("babbler top" in line for line in screen(session)), way_out
