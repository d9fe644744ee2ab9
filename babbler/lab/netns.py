"""Building a lab in the kernel: namespaces and veth links, and taking them down."""

from __future__ import annotations

import subprocess

from babbler.lab.topology import LabError, link_name

PULLED = "pulled"  # the alias of a link end whose cable `plug` pulled out


def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(args, capture_output=True, text=True, check=False)
    if check and result.returncode != 0:
        raise LabError(f"{' '.join(args)}: {result.stderr.strip() or result.returncode}")
    return result


def add_namespace(netns: str, real_links: bool = False) -> None:
    run("ip", "netns", "add", netns)
    run("ip", "-n", netns, "link", "set", "lo", "up")
    if real_links:  # the kernel's DAD defaults, as on a machine
        return
    # Virtual links come up at once; skip duplicate address detection so the link-local is
    # usable at once too (real links pay ~1 s of DAD here).
    run(
        "ip",
        "netns",
        "exec",
        netns,
        "sysctl",
        "-qw",
        "net.ipv6.conf.default.accept_dad=0",
        "net.ipv6.conf.all.accept_dad=0",
    )


def add_link(
    a: int,
    netns_a: str,
    b: int,
    netns_b: str,
    prefix: str = "v",
    up: bool = True,
    names: tuple[str, str] | None = None,
) -> None:
    """A veth pair v<a>x<b> (in a's namespace) <-> v<b>x<a> (in b's), up unless `up` is
    False (a cable not plugged in yet: `plug`). `names`: the two ends' names, if others
    (a macOS node's end is en2, en3...)."""
    here, there = names or (link_name(a, b, prefix), link_name(b, a, prefix))
    run(
        *("ip", "link", "add", here, "netns", netns_a),
        *("type", "veth", "peer", "name", there, "netns", netns_b),
    )
    if up:
        plug(a, netns_a, b, netns_b, prefix, names=(here, there))


def plug(
    a: int,
    netns_a: str,
    b: int,
    netns_b: str,
    prefix: str = "v",
    names: tuple[str, str] | None = None,
    up: bool = True,
) -> None:
    """Both ends of a link up, as a cable plugged in brings them (`up` False: down, as
    when it is pulled out). A pulled end is marked (its alias PULLED): a Mac keeps a port
    up with no cable in it, `status: inactive`, and a macOS node's `ifconfig` says so
    (macos/server.py)."""
    here, there = names or (link_name(a, b, prefix), link_name(b, a, prefix))
    state = "up" if up else "down"
    for netns, name in ((netns_a, here), (netns_b, there)):
        run("ip", "-n", netns, "link", "set", name, state, "alias", "" if up else PULLED)


def delete_namespaces(names: list[str]) -> None:
    existing = run("ip", "netns", "list", check=False).stdout.split()
    for netns in names:
        if netns in existing:
            run("ip", "netns", "del", netns, check=False)
