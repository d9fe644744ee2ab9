"""babblerd's own kernel setup (babeld never does it): RAs kept before forwarding, mesh
links without RAs or redirects, everything put back backwards."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

from babbler.core.links import Link
from babbler.core.platform import LINUX, MACOS
from babbler.daemon.hostsetup import FORWARDING, IPV4_LINK, MESH_LINK, HostSetup, plan
from babbler.daemon.sysctls import READ_FOR, ProcSys, SysctlCommand, Sysctls
from babbler.host.record import read_record


def test_the_host_setup_keeps_ras_before_forwarding_and_undoes_it_backwards(
    tmp_path: Path,
) -> None:
    """babblerd's own kernel setup on a fake /proc/sys: an uplink that takes RAs (accept_ra
    1) keeps them (2) before IPv6 forwarding goes on; mesh links take none; stop puts every
    value back, forwarding first."""
    root = tmp_path / "sys"
    values = {
        FORWARDING: "0",
        "net/ipv6/conf/default/accept_ra": "1",
        "net/ipv6/conf/eth0/accept_ra": "1",
        "net/ipv6/conf/wlan0/accept_ra": "0",
    }
    for mesh_key in ("ipv6/conf/v1/accept_ra", "ipv6/conf/v1/accept_redirects",
                     "ipv4/conf/v1/accept_redirects", "ipv4/conf/v1/send_redirects"):  # fmt: skip
        values[f"net/{mesh_key}"] = "1"
    for name, value in values.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(value + "\n")
    order = [n for n, _ in plan({"eth0": "1", "wlan0": "0", "default": "1"}, {"v1"})]
    assert order[:2] == ["net/ipv6/conf/default/accept_ra", "net/ipv6/conf/eth0/accept_ra"]
    assert order[-1] == FORWARDING  # last: the RAs are kept by then
    setup = HostSetup(Sysctls(tmp_path, ProcSys(root), boot="b"), LINUX)
    links = {n: Link(n, i) for i, n in enumerate(("eth0", "wlan0", "v1"), 2)}
    setup.apply(links, {"v1"})
    now = {n: (root / n).read_text().strip() for n in values}
    assert now[FORWARDING] == "1" and now["net/ipv6/conf/eth0/accept_ra"] == "2"
    assert now["net/ipv6/conf/wlan0/accept_ra"] == "0"  # took no RAs: left alone
    assert (
        now["net/ipv6/conf/v1/accept_ra"] == "0" and now["net/ipv4/conf/v1/send_redirects"] == "0"
    )
    setup.apply(links, set())  # the mesh stopped
    assert {n: (root / n).read_text().strip() for n in values} == values


def test_skip_kernel_setup_changes_nothing_and_says_what_is_missing_once(
    tmp_path: Path,
) -> None:
    import structlog.testing

    root = tmp_path / "sys"
    values = {FORWARDING: "1", "net/ipv6/conf/eth0/accept_ra": "1"}  # set by a unit, not RAs
    for name, value in values.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(value + "\n")
    setup = HostSetup(Sysctls(tmp_path, ProcSys(root), boot="b"), LINUX)
    links = {"eth0": Link("eth0", 2), "v1": Link("v1", 3)}
    with structlog.testing.capture_logs() as logs:
        setup.apply(links, {"v1"}, skip=True)
        setup.apply(links, {"v1"}, skip=True)
    said = [e for e in logs if e["event"] == "--skip-kernel-setup: the mesh needs"]
    assert len(said) == 1 and "net.ipv6.conf.eth0.accept_ra=2" in said[0]["settings"]
    assert "net.ipv6.conf.all.forwarding=1" not in said[0]["settings"]  # already so
    assert {n: (root / n).read_text().strip() for n in values} == values  # nothing changed


def fake_proc(tmp_path: Path, values: dict[str, str]) -> Path:
    root = tmp_path / "sys"
    for name, value in values.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(value + "\n")
    return root


def test_a_link_that_joins_or_leaves_the_mesh_gets_its_own_values_back(tmp_path: Path) -> None:
    """eth1 first takes RAs (1 -> 2 as another link), then becomes a mesh link (0), then
    leaves: each step from the plan, and at the end every value is the host's again, IPv4's
    per-link pair included (it goes when IPv4 is refused)."""
    values = {FORWARDING: "0", "net/ipv6/conf/default/accept_ra": "1"}
    for link in ("v1", "eth1"):
        for key, _ in MESH_LINK + IPV4_LINK:
            values[key.format(link)] = "1"
    values["net/ipv4/conf/v1/rp_filter"] = values["net/ipv4/conf/eth1/rp_filter"] = "0"
    root = fake_proc(tmp_path, values)

    def read() -> dict[str, str]:
        return {n: (root / n).read_text().strip() for n in values}

    setup = HostSetup(Sysctls(tmp_path, ProcSys(root), boot="b"), LINUX)
    links = {n: Link(n, i) for i, n in enumerate(("v1", "eth1"), 2)}
    setup.apply(links, {"v1"}, ipv4=True)
    assert read()["net/ipv6/conf/eth1/accept_ra"] == "2"
    assert (
        read()["net/ipv4/conf/v1/forwarding"] == "1" and read()["net/ipv4/conf/v1/rp_filter"] == "2"
    )
    setup.apply(links, {"v1", "eth1"}, ipv4=True)  # eth1 joins
    assert read()["net/ipv6/conf/eth1/accept_ra"] == "0"
    setup.apply(links, {"v1", "eth1"}, ipv4=False)  # IPv4 refused: its pair goes back
    assert read()["net/ipv4/conf/v1/forwarding"] == "1" == values["net/ipv4/conf/v1/forwarding"]
    assert read()["net/ipv4/conf/v1/rp_filter"] == "0"
    setup.apply(links, {"v1"})  # eth1 leaves: its RAs as another link again
    assert read()["net/ipv6/conf/eth1/accept_ra"] == "2"
    assert read()["net/ipv4/conf/eth1/send_redirects"] == "1"
    setup.apply(links, set())
    assert read() == values


class Writes(ProcSys):
    """/proc/sys on a directory, remembering every write."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.writes: list[tuple[str, str]] = []

    def write(self, name: str, value: str) -> None:
        self.writes.append((name, value))
        super().write(name, value)


def test_a_setup_done_stays_done_through_every_refresh(tmp_path: Path) -> None:
    """Each refresh plans again from the host's own values, not from the 2 an earlier pass
    set: the uplink never goes back to 1 for a moment while forwarding is on (RAs lost; CI
    caught it there once), and nothing is written when nothing changed."""
    values = {FORWARDING: "0", "net/ipv6/conf/default/accept_ra": "1"}
    values["net/ipv6/conf/eth0/accept_ra"] = "1"
    proc = Writes(fake_proc(tmp_path, values))
    setup = HostSetup(Sysctls(tmp_path, proc, boot="b"), LINUX)
    links = {n: Link(n, i) for i, n in enumerate(("eth0", "v1"), 2)}
    setup.apply(links, {"v1"})
    assert ("net/ipv6/conf/eth0/accept_ra", "2") in proc.writes
    proc.writes.clear()
    for _ in range(3):
        setup.apply(links, {"v1"})
    assert proc.writes == []
    (proc.root / "net/ipv6/conf/eth0/accept_ra").write_text("0\n")  # the admin's, since
    setup.apply(links, {"v1"})
    assert proc.writes == []  # theirs: neither put back nor set again
    setup.apply(links, set())
    assert (proc.root / "net/ipv6/conf/eth0/accept_ra").read_text() == "0\n"


class FakeSysctl:
    """sysctl(8) as macOS answers it, on a dict."""

    def __init__(self, values: dict[str, str]) -> None:
        self.values = values
        self.ran: list[tuple[str, ...]] = []

    def __call__(self, args: Sequence[str]) -> subprocess.CompletedProcess[str]:
        self.ran.append(tuple(args))
        if args[1] == "-n":
            known = args[2] in self.values
            out = self.values.get(args[2], "")
            return subprocess.CompletedProcess(args, 0 if known else 1, out + "\n", "")
        name, _, value = args[2].partition("=")
        self.values[name] = value
        return subprocess.CompletedProcess(args, 0, f"{name}: 0 -> {value}\n", "")


def test_macos_gets_forwarding_and_no_redirects_through_sysctl(tmp_path: Path) -> None:
    before = {
        "kern.bootsessionuuid": "B-1",
        "net.inet6.ip6.forwarding": "0",
        "net.inet.ip.forwarding": "0",
        "net.inet6.ip6.redirect": "1",
        "net.inet.ip.redirect": "1",
    }
    run = FakeSysctl(dict(before))
    sysctls = Sysctls(tmp_path, SysctlCommand(run))
    setup = HostSetup(sysctls, MACOS)
    setup.apply({"en2": Link("en2", 5)}, {"en2"}, ipv4=True)
    assert run.values["net.inet6.ip6.forwarding"] == "1" == run.values["net.inet.ip.forwarding"]
    assert run.values["net.inet6.ip6.redirect"] == "0"
    assert ("sysctl", "-w", "net.inet6.ip6.forwarding=1") in run.ran
    assert '"boot": "B-1"' in (tmp_path / "sysctls").read_text()  # the boot, for a crash
    setup.apply({"en2": Link("en2", 5)}, {"en2"}, ipv4=False)
    assert run.values["net.inet.ip.forwarding"] == "0"  # IPv4 gone: the Mac routes none
    setup.apply({}, set())
    assert run.values == before


def test_links_babblerd_would_use_skip_dad_from_the_start_and_nothing_else_changes() -> None:
    """A Thunderbolt link that appeared down: no DAD on it before it comes up, and no
    forwarding while no link is in use; other links are never touched."""
    down = plan({"eth0": "1"}, set(), selected={"thunderbolt0"})
    assert down == [
        ("net/ipv6/conf/thunderbolt0/accept_dad", "0"),
        ("net/ipv6/conf/thunderbolt0/optimistic_dad", "1"),
        ("net/ipv6/conf/thunderbolt0/use_optimistic", "1"),
    ]
    running = plan({"eth0": "1"}, {"thunderbolt0"}, selected={"thunderbolt0", "thunderbolt1"})
    names = [n for n, _ in running]
    assert names[:6:3] == [f"net/ipv6/conf/thunderbolt{i}/accept_dad" for i in (0, 1)]
    assert not any("eth0/accept_dad" in n for n in names) and names[-1] == FORWARDING


class ReadOnly(ProcSys):
    """/proc/sys in a container that mounts it read-only."""

    def write(self, name: str, value: str) -> None:
        raise OSError(30, "Read-only file system")


def test_settings_that_fail_or_hang_are_returned_to_the_caller_not_logged_each_pass(
    tmp_path: Path,
) -> None:
    """sysctl(8) ended by its timeout, or a read-only /proc/sys: the setup returns what it
    could not set (the daemon shows it as `kernel_problem` and says it once)."""

    def hangs(args: Sequence[str]) -> subprocess.CompletedProcess[str]:
        if args[1] == "-n":
            return subprocess.CompletedProcess(args, 0, "0\n", "")
        raise subprocess.TimeoutExpired(list(args), 3.0)

    sysctls = Sysctls(tmp_path, SysctlCommand(hangs), boot="b")
    assert not sysctls.set("net.inet6.ip6.forwarding", "1")
    assert sysctls.problem == "net.inet6.ip6.forwarding: sysctl(8) gave no answer in 3 s"
    root = fake_proc(tmp_path, {FORWARDING: "0", "net/ipv6/conf/default/accept_ra": "0"})
    setup = HostSetup(Sysctls(tmp_path, ReadOnly(root), boot="b"), LINUX)
    problems = setup.apply({"v1": Link("v1", 2)}, {"v1"})
    assert problems[-1] == "cannot set net.ipv6.conf.all.forwarding=1: Read-only file system"


def test_macos_settings_are_read_once_a_while_not_at_every_pass(tmp_path: Path) -> None:
    """Each read is a sysctl(8) process: passes within READ_FOR read none again; a value
    changed by hand is seen after it, and the stop reads afresh (so a hand-made change is
    left alone, not overwritten with the value from before babblerd)."""
    now = [0.0]
    run = FakeSysctl({"kern.bootsessionuuid": "B-1", **dict.fromkeys(
        ["net.inet6.ip6.forwarding", "net.inet.ip.forwarding"], "0"), **dict.fromkeys(
        ["net.inet6.ip6.redirect", "net.inet.ip.redirect"], "1")})  # fmt: skip
    sysctls = Sysctls(tmp_path, SysctlCommand(run, clock=lambda: now[0]))
    setup = HostSetup(sysctls, MACOS)
    links = {"en2": Link("en2", 5)}
    setup.apply(links, {"en2"}, ipv4=True)
    ran = len(run.ran)
    for _ in range(4):  # passes every 2 s
        now[0] += 2.0
        setup.apply(links, {"en2"}, ipv4=True)
    assert len(run.ran) == ran, run.ran[ran:]
    run.values["net.inet.ip.forwarding"] = "0"  # turned off by hand
    now[0] += READ_FOR
    setup.apply(links, {"en2"}, ipv4=True)
    assert run.values["net.inet.ip.forwarding"] == "1"  # seen, and set again
    run.values["net.inet6.ip6.redirect"] = "2"  # someone's own, just before the stop
    setup.restore()
    assert run.values["net.inet6.ip6.redirect"] == "2"  # theirs, left alone
    assert run.values["net.inet6.ip6.forwarding"] == "0"


def test_the_value_put_back_is_read_when_babblerd_changes_a_setting_not_a_while_before(
    tmp_path: Path,
) -> None:
    """sysctl(8)'s answers are taken as current for READ_FOR, but the value recorded to put
    back (at stop, or by the next start after a crash) is read afresh when babblerd changes
    the setting: one made by hand in between is what goes back, not the one before it."""
    now = [0.0]
    name = "net.inet6.ip6.redirect"
    run = FakeSysctl({name: "1"})
    sysctls = Sysctls(tmp_path, SysctlCommand(run, clock=lambda: now[0]), boot="B-1")
    assert sysctls.read(name) == "1"  # a pass read it
    run.values[name] = "2"  # changed by hand, behind babblerd's back
    now[0] += READ_FOR / 2
    assert sysctls.set(name, "0")
    assert run.values[name] == "0"
    assert read_record(tmp_path, "B-1") == {name: ("2", "0")}  # what a crash leaves
    assert sysctls.restore() == [name]
    assert run.values[name] == "2"
