"""babblerd's own kernel setup (babeld never does it): RAs kept before forwarding, mesh
links without RAs or redirects, everything put back backwards."""

from __future__ import annotations

from pathlib import Path

from babbler.core.links import Link
from babbler.daemon.hostsetup import FORWARDING, HostSetup, plan
from babbler.daemon.sysctls import Sysctls


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
    setup = HostSetup(Sysctls(tmp_path, root, boot="b"))
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
    setup = HostSetup(Sysctls(tmp_path, root, boot="b"))
    links = {"eth0": Link("eth0", 2), "v1": Link("v1", 3)}
    with structlog.testing.capture_logs() as logs:
        setup.apply(links, {"v1"}, skip=True)
        setup.apply(links, {"v1"}, skip=True)
    said = [e for e in logs if e["event"] == "--skip-kernel-setup: the mesh needs"]
    assert len(said) == 1 and "net.ipv6.conf.eth0.accept_ra=2" in said[0]["settings"]
    assert "net.ipv6.conf.all.forwarding=1" not in said[0]["settings"]  # already so
    assert {n: (root / n).read_text().strip() for n in values} == values  # nothing changed
