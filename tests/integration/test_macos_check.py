"""scripts/macos-check, the check of what the macOS lab cannot show, run where no Mac is: in a
lab macOS node, whose stand-in commands answer some of its command lines and refuse the rest.
It must print a verdict for every check, skip (not crash on, nor pass) what the stand-in does
not answer, put back every link and sysctl it changed, also when it is interrupted, and exit
as its checks say."""

from __future__ import annotations

import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from babbler.lab import Lab, Node, wait
from babbler.lab.macos import node as mac
from tests import needs
from tests.integration.conftest import macos_lab
from tests.integration.helpers import WAIT, until

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "macos-check"
CHECKS = (
    "launchd",
    "port-status",
    "far-end-echo",
    "far-end-probe",
    "source-address",
    "firewall",
    "pf",
    "local-network",
    "netifaces",
    "rdma",
    "ra-forwarding",
    "route-socket",
)
# The checks whose first command line the lab's stand-in does not answer (with babblerd
# running): each a skip naming that command line.
NOT_ANSWERED = {
    "far-end-echo": "ping6 -c 2 ff02::1%en2",
    "source-address": "route -n get -inet6 ",
    "pf": "pfctl -s info",
    "netifaces": "python -c 'import netifaces'",
    "ra-forwarding": "ndp -rn",
    "route-socket": "ifconfig bridge9 create",
}
SYSCTLS = (
    "net.inet6.ip6.forwarding",
    "net.inet.ip.forwarding",
    "net.inet.ip.redirect",
    "net.inet6.ip6.redirect",
)
VERDICT = re.compile(r"^([a-z-]+): +(pass|fail|skip) \((.*)\)$")
RUN_FOR = 180.0  # the script's own waits: a few seconds here (--ra-wait 1)


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    """Two macOS nodes cabled by one Thunderbolt cable (en2 at both), out of bridge0."""
    with macos_lab("c", 2, "line", speed_gbps=80) as lab:
        yield lab


@pytest.fixture
def stopped(lab: Lab) -> Iterator[Node]:
    """Node 1 with its babblerd stopped (started again afterwards)."""
    node = lab.nodes[0]
    lab.stop(node)
    try:
        yield node
    finally:
        lab.start(node)
        lab.wait_reachable(WAIT)


def state(lab: Lab, node: Node) -> tuple[dict[str, list[str]], dict[str, str]]:
    """The node as the script's commands see it: each link's ifconfig lines (in any order:
    an address put back may come back in another place) and the sysctls."""
    listing = lab.exec(node, "ifconfig")
    assert listing.returncode == 0, listing.stderr
    links: dict[str, list[str]] = {}
    name = ""
    for line in listing.stdout.splitlines():
        if line and not line[0].isspace():
            name = line.split(":", 1)[0]
        links.setdefault(name, []).append(line)
    values = {}
    for sysctl in SYSCTLS:
        read = lab.exec(node, "sysctl", "-n", sysctl)
        assert read.returncode == 0, read.stderr
        values[sysctl] = read.stdout.strip()
    return {k: sorted(v) for k, v in links.items()}, values


def back_to(lab: Lab, node: Node, before: tuple[dict[str, list[str]], dict[str, str]]) -> None:
    """The node's links and sysctls as `before` (babblerd may be mid-pass: waited for)."""
    wait.until(lambda: state(lab, node) == before, WAIT)
    assert state(lab, node) == before


def with_a_default_router(lab: Lab, node: Node) -> None:
    """An IPv6 default route off the mesh (bridge0), as a LAN's router gives a Mac."""
    added = lab.exec(
        node, "ip", "-6", "route", "replace", "default", "via", "fe80::1", "dev", "bridge0"
    )
    assert added.returncode == 0, added.stderr


def command(node: Node, *args: str, shell: str | None = None) -> list[str]:
    """The script's command line in the node's namespace, as `babbler-lab exec` runs it."""
    run = [shell, str(SCRIPT)] if shell else [str(SCRIPT)]
    return ["env", f"BABBLER_SOCKET={node.socket}", *run, "--yes", "--log", str(node.log), *args]


def settled(lab: Lab, node: Node) -> bool:
    """Done with what follows the mesh's start: the far node's info came, and with it the
    cable's size (an MTU change after `before` would read as the script's doing)."""
    status = lab.status(node)
    informed = any(n["info_age_s"] is not None for n in status["nodes"])
    return informed and all(i["mtu"] == i["max_mtu"] for i in status["interfaces"])


def verdicts(out: str) -> dict[str, tuple[str, str]]:
    """check -> (verdict, why); every check exactly once, nothing else in that form."""
    found = [m.groups() for m in map(VERDICT.match, out.splitlines()) if m]
    names = [name for name, _, _ in found]
    assert sorted(names) == sorted(CHECKS), out
    return {name: (verdict, why) for name, verdict, why in found}


def exit_status_says(result: subprocess.CompletedProcess[str]) -> None:
    said = verdicts(result.stdout)
    failed = any(verdict == "fail" for verdict, _ in said.values())
    assert result.returncode == (1 if failed else 0), result.stdout + result.stderr


def test_with_babblerd_running_every_check_says_and_everything_is_put_back(lab: Lab) -> None:
    """A verdict for every check; what the stand-in refuses is a skip naming the command
    line, what it answers is checked against babblerd's status and log; nothing changed."""
    node = lab.nodes[0]
    with_a_default_router(lab, node)
    until(lambda: settled(lab, node), WAIT, "n1 has n2's node info and its cable's size")
    before = state(lab, node)
    result = lab.exec(node, *command(node, "--ra-wait", "1"), timeout=RUN_FOR)
    out = result.stdout
    said = verdicts(out)
    exit_status_says(result)
    for check, line in NOT_ANSWERED.items():
        verdict, why = said[check]
        assert verdict == "skip" and why.startswith(f"cannot check: {line}"), (check, why)
        assert re.search(r"not answered( \(.*\))?$", why), (check, why)
    # The lab answers launchctl: babblerd, started by the lab, is not a LaunchDaemon there
    assert said["launchd"] == (
        "skip",
        "babblerd is not installed as a LaunchDaemon (docs/operations.md, macOS)",
    )
    # What the stand-in answers is checked for real, with babblerd's status and its log
    for check in ("firewall", "local-network", "far-end-probe"):
        assert said[check][0] == "pass", (check, said[check])
    assert "babblerd:  not started" in out
    back_to(lab, node, before)


def test_without_babblerd_it_turns_forwarding_on_and_puts_it_back(lab: Lab, stopped: Node) -> None:
    """The router advertisement check turns IPv6 forwarding on itself when babblerd has not
    (said before it asks), and puts it back; the checks that need babblerd skip. Run by bash,
    as macOS's /bin/sh is (bash keeps traps in subshells, where dash does not)."""
    with_a_default_router(lab, stopped)
    before = state(lab, stopped)
    assert before[1]["net.inet6.ip6.forwarding"] == "0"
    result = lab.exec(stopped, *command(stopped, "--ra-wait", "1", shell="bash"), timeout=RUN_FOR)
    out = result.stdout
    said = verdicts(out)
    exit_status_says(result)
    assert "net.inet6.ip6.forwarding 0 -> 1" in out
    assert "put back: net.inet6.ip6.forwarding 0" in out
    assert said["ra-forwarding"] == ("skip", "cannot check: ndp -rn not answered")
    for check in ("source-address", "local-network", "route-socket"):
        assert said[check][0] == "skip" and "babblerd is not running" in said[check][1]
    assert state(lab, stopped) == before


def test_interrupted_it_puts_back_what_it_changed(lab: Lab, stopped: Node) -> None:
    """Ctrl-C while forwarding is on for the router advertisement check: put back, exit 130."""
    with_a_default_router(lab, stopped)
    before = state(lab, stopped)
    env = ["env", *(f"{k}={v}" for k, v in mac.environment(stopped).items())]
    script = subprocess.Popen(
        ["ip", "netns", "exec", stopped.netns, *env, *command(stopped, "--ra-wait", "120")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        until(
            lambda: state(lab, stopped)[1]["net.inet6.ip6.forwarding"] == "1",
            WAIT,
            "the check turned forwarding on",
        )
        script.send_signal(signal.SIGINT)
        out, _ = script.communicate(timeout=WAIT)
    finally:
        if script.poll() is None:
            script.kill()
            script.wait()
    assert script.returncode == 130, out
    assert "interrupted: putting back" in out and "put back: net.inet6.ip6.forwarding 0" in out
    assert state(lab, stopped) == before


def test_off_a_mac_and_off_the_lab_it_refuses_and_changes_nothing() -> None:
    """On Linux outside a lab macOS node (a fresh namespace of its own) it stops at once."""
    unshare = needs.tool("unshare", "util-linux")
    result = subprocess.run(
        [unshare, "--net", str(SCRIPT), "--yes"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "this is not a Mac" in result.stderr
    assert not any(map(VERDICT.match, result.stdout.splitlines())), result.stdout


def test_help_explains_every_flag_and_check() -> None:
    result = subprocess.run([str(SCRIPT), "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    for flag in ("--yes", "--interface", "--peer", "--log", "--ra-wait", "--help"):
        assert re.search(rf"^\s+(-\w, )?{flag}\b.*\S", result.stdout, re.M), flag
    for check in CHECKS:
        assert re.search(rf"^  {check}\*? +\S", result.stdout, re.M), check


def test_shellcheck_finds_nothing() -> None:
    """POSIX sh for macOS's /bin/sh: shellcheck's sh dialect flags bash-only constructs."""
    shellcheck = needs.tool("shellcheck", "shellcheck")
    result = subprocess.run(
        [shellcheck, "-s", "sh", str(SCRIPT)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout
