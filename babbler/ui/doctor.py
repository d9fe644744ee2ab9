"""`babblerctl doctor`: what keeps a mesh from working on this host, one check per line, with
what to do next (DESIGN.md, "the doctor"). Pure: facts in (gathered by ctl/doctor.py, or
written by the tests), checks out.

Every check has a fixed name, a status (ok, warn, fail), what it saw and what to do. A fact
that could not be read is None: its check says so (`warn`, "could not read ...") rather than
guessing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from babbler.client.model import Status
from babbler.core.cablegraph import CableGraph
from babbler.core.printable import escape
from babbler.ui import rdma_doctor

OK, WARN, FAIL = "ok", "warn", "fail"
KEY_HINT = "a different mesh key, or no babblerd at the far end (babblerctl doctor there)"


@dataclass(frozen=True)
class Check:
    check: str
    status: str  # ok, warn, fail
    saw: str
    do: str = ""


@dataclass(frozen=True)
class LinkFacts:
    """A physical link as the host shows it."""

    name: str
    up: bool
    carrier: bool | None  # None: unknown
    link_local: bool
    mtu: int | None = None
    speed_mbps: int | None = None
    thunderbolt: bool = False
    port: str | None = None  # macOS: the hardware port ("Thunderbolt 1")


@dataclass(frozen=True)
class LinuxFacts:
    sysctls: dict[str, str | None]  # dotted names -> value (None: unreadable)
    accept_ra: dict[str, str]  # other links (and `default`) -> accept_ra
    rules: int | None  # babblerd's rules in the kernel (None: could not read)
    thunderbolt_controller: bool
    thunderbolt_net: bool  # the module is loaded (or built in)


@dataclass(frozen=True)
class MacFacts:
    bridges: dict[str, set[str]]  # bridgeN -> members
    thunderbolt: set[str]  # the devices of the Thunderbolt ports (networksetup)
    cabled_ports: dict[str, bool] | None  # Thunderbolt port device -> another machine at its end
    firewall: str | None  # "on", "off", "block-all"; None: could not read
    rdma: dict[str, Any] | None = None  # this Mac's RDMA readiness, read here (core/rdma.py)


@dataclass(frozen=True)
class Facts:
    platform: str  # "Linux" or "macOS"
    root: bool
    socket: str
    status: Status | None
    status_error: str | None = None
    babeld_version: str | None = None  # `babeld -V` here, when no babblerd says
    links: tuple[LinkFacts, ...] = ()
    linux: LinuxFacts | None = None
    mac: MacFacts | None = None
    leftovers: list[str] | None = None  # settings a crashed babblerd left; None: not readable
    record: str | None = None  # the file the leftovers were read from (babblerd's state dir)
    # Mesh addresses on the links while no babblerd runs: (link, address/prefix length) a
    # crashed one left; None: not looked (babblerd runs) or could not be read.
    stale_addresses: tuple[tuple[str, str], ...] | None = None
    not_read: tuple[str, ...] = field(default_factory=tuple)  # what needed root


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def daemon(facts: Facts) -> Iterable[Check]:
    s = facts.status
    if s is None:
        saw, _, start = (facts.status_error or f"no answer at {facts.socket}").partition("; ")
        yield Check(
            "babblerd",
            FAIL,
            saw,
            f"{start or 'start it'}; its log says why it stopped (docs/operations.md, Logs)",
        )
        if facts.babeld_version is None:
            yield Check("babeld", FAIL, "no babeld on PATH", "install babeld 1.12 or later")
        else:
            yield Check("babeld", OK, f"babeld {facts.babeld_version} on PATH")
        return
    yield Check("babblerd", OK, f"babblerd {s.version} answers, mesh {s.mesh}, mode {s.mode}")
    b = s.babeld
    if not b.found:
        yield Check(
            "babeld",
            FAIL,
            "babblerd finds no babeld",
            "install babeld 1.12 or later where babblerd's PATH reaches it",
        )
    elif b.pid is None and s.mesh != "idle":
        yield Check(
            "babeld",
            FAIL,
            f"babeld not running ({b.last_error or 'no error said'})",
            "babblerd restarts it with back-off; its log says why it stops",
        )
    else:
        running = f"running (pid {b.pid})" if b.pid else "not needed now"
        restarts = f", {_plural(b.restarts, 'restart')}" if b.restarts else ""
        version = (b.version or "").removeprefix("babeld-")  # `babeld -V` says babeld-1.12.1
        said = f"babeld {version} {running}" if version else f"babeld {running}"
        yield Check("babeld", OK, f"{said}{restarts}")


def kernel(facts: Facts) -> Iterable[Check]:
    """What babblerd's last reconcile could not do in the kernel (status.kernel_problem)."""
    s = facts.status
    if s is None:
        return
    if s.kernel_problem:
        yield Check(
            "kernel",
            FAIL,
            s.kernel_problem,
            "babblerd keeps the last good state and retries; its log has the first failure "
            "(docs/reliability.md, 'The kernel fails')",
        )
    else:
        yield Check("kernel", OK, "babblerd's last reconcile went through")


def links(facts: Facts) -> Iterable[Check]:
    s = facts.status
    used = {i.name for i in s.interfaces} if s else set()
    neighbours: dict[str, int] = {}
    for n in s.neighbours if s else ():
        if n.interface:
            neighbours[n.interface] = neighbours.get(n.interface, 0) + 1
    if not facts.links and s is None:  # its --interface may name links of any kind (veths)
        yield Check(
            "links",
            WARN,
            "not checked: babblerd is not running, and it says which links it uses (none here"
            " is a physical Ethernet or Thunderbolt link)",
            "start babblerd, then run the doctor again",
        )
    elif not facts.links:
        yield Check(
            "links",
            WARN,
            "no physical Ethernet or Thunderbolt link",
            "cable this machine to another; on Linux load thunderbolt-net for Thunderbolt",
        )
    for link in facts.links:
        name = f"link {link.name}"
        where = f" ({link.port})" if link.port else ""
        up = "sudo ifconfig {} up" if facts.platform == "macOS" else "sudo ip link set {} up"
        mtu = f", MTU {link.mtu}" if link.mtu else ""
        if s is not None and link.name not in used:
            yield Check(name, OK, f"not a mesh link: babblerd's configuration leaves it out{where}")
        elif not link.up:
            yield Check(name, WARN, f"down{where}", f"to use it: {up.format(link.name)}")
        elif link.carrier is False:
            yield Check(name, OK, f"no cable{where}{mtu}")
        elif not link.link_local:
            yield Check(
                name,
                FAIL if s is not None else WARN,  # without babblerd: perhaps not a mesh link
                f"up but no IPv6 link-local address{where}",
                _ll_fix(facts, link),
            )
        elif s is not None and not neighbours.get(link.name):
            yield Check(
                name,
                WARN,
                f"in the mesh, no neighbour{where}{mtu}",
                f"cabled? then likely {KEY_HINT}",
            )
        else:
            count = neighbours.get(link.name, 0)
            speed = f", {link.speed_mbps} Mb/s" if link.speed_mbps else ""
            said = f"{_plural(count, 'neighbour')}" if s is not None else "usable"
            yield Check(name, OK, f"{said}{where}{speed}{mtu}")


def _ll_fix(facts: Facts, link: LinkFacts) -> str:
    if facts.platform == "macOS":
        service = link.port or link.name
        return f'sudo networksetup -setv6LinkLocal "{service}" (or -setv6automatic)'
    return (
        f"IPv6 must be on there: sudo sysctl -w net.ipv6.conf.{link.name}.disable_ipv6=0; "
        f"a network manager may hold the link (leave it unmanaged)"
    )


# A cable whose two ends differ while babblerd fits them: each end sets the smaller of the
# two offers as soon as it reads the other's (core/mtu.py), and pushes its info when it has.
# So for a second or two after a cable comes (the far end reads our offer from babeld's next
# dump, sets, its push waits nodes/own.py SETTLE and a pass) one end is ahead. An info of
# the far end younger than this, with one end at the size both offer, is that moment and
# not a fault: a far end that really refused the size says it no more after this. Seconds.
FITTING = 10.0


def mtu(facts: Facts) -> Iterable[Check]:
    """Both ends of each cable at the same MTU (a mismatch drops large frames silently)."""
    s = facts.status
    if s is None:
        return
    graph = CableGraph.from_status(s.raw)
    mine = {i.name: (i.mtu, i.max_mtu) for i in s.interfaces}
    nodes = {n.node_id: n for n in s.nodes}
    differ, fitting, same = [], [], 0
    for pair, cables in sorted(graph.cables.items(), key=lambda kv: sorted(kv[0])):
        if s.node_id not in pair:
            continue
        for cable in cables:
            near, far = cable.end_on(s.node_id), cable.end_facing(s.node_id)
            node = nodes.get(far.node_id)
            theirs = {link.name: link for link in node.links} if node else {}
            here, offer = mine.get(near.interface, (None, None))
            link = theirs.get(far.interface)
            there = link.mtu if link else None
            if here is None or there is None:
                continue
            if here == there:
                same += 1
                continue
            far_name = graph.label(far.node_id)
            said = f"{near.interface} {here} against {far_name}'s {far.interface} {there}"
            agreed = min(offer, link.max_mtu) if offer and link and link.max_mtu else None
            age = node.info_age_s if node else None
            if agreed in (here, there) and age is not None and age < FITTING:
                fitting.append(f"{said} as of {age:g} s ago, both to {agreed}")
            else:
                differ.append(said)
    if differ:
        yield Check(
            "mtu",
            FAIL,
            "the two ends of a cable differ: " + "; ".join(differ) + " (large frames are lost)",
            "give both ends the same MTU: sudo ip link set LINK mtu N (the smaller of the two)",
        )
    elif fitting:
        yield Check(
            "mtu",
            WARN,
            "babblerd is fitting a cable's two ends: " + "; ".join(fitting),
            "run the doctor again in a few seconds",
        )
    elif same:
        yield Check("mtu", OK, f"both ends of {_plural(same, 'cable')} at the same MTU")


def ipv4(facts: Facts) -> Iterable[Check]:
    s = facts.status
    if s is None:
        return
    if s.ipv4_problem:
        yield Check(
            "ipv4",
            FAIL,
            f"IPv4 refused: {s.ipv4_problem}",
            "pick another --ipv4-prefix, the same on every node",
        )
    elif s.ipv4_prefix is None:
        yield Check("ipv4", OK, "IPv4 off (--ipv4-prefix off)")
    else:
        yield Check("ipv4", OK, f"node address {s.node_address_v4} in {s.ipv4_prefix}")


def kernel_linux(facts: Facts) -> Iterable[Check]:
    linux = facts.linux
    if linux is None:
        return
    running = facts.status is not None and facts.status.mesh == "running"
    forwarding = linux.sysctls.get("net.ipv6.conf.all.forwarding")
    if forwarding is None:
        yield Check("forwarding", WARN, "could not read net.ipv6.conf.all.forwarding")
    elif running and forwarding != "1":
        yield Check(
            "forwarding",
            FAIL,
            "IPv6 forwarding off while the mesh runs: nothing crosses this node",
            "babblerd turns it on unless started with --skip-kernel-setup: drop that flag",
        )
    else:
        yield Check("forwarding", OK, f"IPv6 forwarding {'on' if forwarding == '1' else 'off'}")
    taking = sorted(name for name, value in linux.accept_ra.items() if value == "1")
    if forwarding == "1" and taking:
        yield Check(
            "router advertisements",
            FAIL,
            f"accept_ra 1 with forwarding on: {', '.join(taking)} lose their RA default route",
            "babblerd sets accept_ra 2 unless --skip-kernel-setup; by hand: "
            + "; ".join(f"sudo sysctl -w net.ipv6.conf.{n}.accept_ra=2" for n in taking),
        )
    else:
        kept = sorted(name for name, value in linux.accept_ra.items() if value == "2")
        said = f"kept with forwarding (accept_ra 2): {', '.join(kept)}" if kept else "none taken"
        yield Check("router advertisements", OK, said)
    if linux.sysctls.get("net.ipv4.ip_forward") == "1":
        yield Check(
            "ip_forward",
            WARN,
            "net.ipv4.ip_forward is 1: this host routes IPv4 between all its links "
            "(babblerd never sets it)",
            "if this host is not meant to be a router: sudo sysctl -w net.ipv4.ip_forward=0",
        )
    if linux.rules is None:
        yield Check("fence", WARN, "could not read the routing rules")
    elif running and linux.rules == 0:
        yield Check(
            "fence",
            FAIL,
            "no babblerd rule: this host does not reach the mesh routes (table 96)",
            "babblerd's log says why ('cannot add rule'); restart it",
        )
    elif linux.rules:
        yield Check(
            "fence",
            OK,
            f"{_plural(linux.rules, 'rule')}: the mesh's routes for the host and the mesh only",
        )
    if linux.thunderbolt_controller and not linux.thunderbolt_net:
        yield Check(
            "thunderbolt-net",
            FAIL,
            "a Thunderbolt controller, but the thunderbolt-net module is not loaded",
            "sudo modprobe thunderbolt-net; to keep it: echo thunderbolt-net | "
            "sudo tee /etc/modules-load.d/thunderbolt-net.conf",
        )
    elif linux.thunderbolt_controller:
        yield Check("thunderbolt-net", OK, "thunderbolt-net loaded")


def kernel_mac(facts: Facts) -> Iterable[Check]:
    mac = facts.mac
    if mac is None:
        return
    held = {b: sorted(members & mac.thunderbolt) for b, members in mac.bridges.items()}
    held = {b: m for b, m in held.items() if m}
    if held:
        ports = ", ".join(f"{b} holds {' '.join(m)}" for b, m in sorted(held.items()))
        deletes = "; ".join(f"sudo ifconfig {b} deletem {p}" for b, m in held.items() for p in m)
        yield Check(
            "thunderbolt bridge",
            FAIL,
            f"{ports}: no link-local address per port, and 3 or more Macs in a loop storm",
            'sudo networksetup -setnetworkserviceenabled "Thunderbolt Bridge" off; ' + deletes,
        )
    else:
        yield Check("thunderbolt bridge", OK, "no Thunderbolt port in a bridge")
    if mac.cabled_ports is not None:
        cabled = sorted(p for p, yes in mac.cabled_ports.items() if yes)
        said = f"a Mac at the far end of {', '.join(cabled)}" if cabled else "no Mac cabled"
        yield Check("thunderbolt cables", OK, said)
    if mac.firewall is None:
        yield Check("firewall", WARN, "could not read the application firewall's state")
    elif mac.firewall == "block-all":
        yield Check(
            "firewall",
            FAIL,
            "the firewall blocks all incoming connections: babeld hears no neighbour",
            "System Settings > Network > Firewall: turn off 'Block all incoming connections'",
        )
    elif mac.firewall == "on":
        yield Check(
            "firewall",
            WARN,
            "the application firewall is on: babeld (UDP 6696) and babblerd must be allowed",
            "sudo /usr/libexec/ApplicationFirewall/socketfilterfw --add $(which babeld)",
        )
    else:
        yield Check("firewall", OK, "the application firewall is off")


def host(facts: Facts) -> Iterable[Check]:
    if facts.leftovers:
        listed = f" (sudo cat {facts.record} lists them)" if facts.record else ""
        yield Check(
            "leftovers",
            WARN,
            f"a crashed babblerd left {_plural(len(facts.leftovers), 'kernel setting')} changed"
            + listed,
            "start babblerd: it puts them back",
        )
    if facts.stale_addresses:
        links = sorted({link for link, _ in facts.stale_addresses})
        yield Check(
            "leftover addresses",
            WARN,
            f"a crashed babblerd left {len(facts.stale_addresses)} mesh address"
            f"{'es' if len(facts.stale_addresses) > 1 else ''}{_on(links)}",
            "start babblerd: it removes them (by hand: "
            + "; ".join(f"sudo ip addr del {a} dev {link}" for link, a in facts.stale_addresses)
            + ")",
        )
    if facts.not_read:
        yield Check(
            "privilege",
            WARN,
            f"not root: could not check {', '.join(facts.not_read)}",
            "sudo babblerctl doctor checks everything",
        )


def _on(links: list[str]) -> str:
    """`, on a, b and c`, or nothing for no links."""
    if not links:
        return ""
    return ", on " + " and ".join([", ".join(links[:-1]), links[-1]] if len(links) > 1 else links)


def rdma(facts: Facts) -> Iterable[Check]:
    """Every Mac of the mesh ready for jaccl or not, and a jaccl hostfile (ui/rdma_doctor.py):
    from babblerd's status; this Mac's from its own commands when babblerd does not say."""
    raw: Mapping[str, Any] = facts.status.raw if facts.status is not None else {"node_id": ""}
    here = facts.mac.rdma if facts.mac is not None else None
    if raw.get("rdma") is None and here is not None:
        raw = {**raw, "rdma": here, "name": raw.get("name") or "this Mac"}
    yield from (Check(*line) for line in [*rdma_doctor.macs(raw), *rdma_doctor.jaccl(raw)])


def checks(facts: Facts) -> list[Check]:
    out: list[Check] = []
    for part in (daemon, kernel, links, mtu, ipv4, kernel_linux, kernel_mac, rdma, host):
        out.extend(part(facts))
    return out


def failed(found: Iterable[Check]) -> bool:
    return any(c.status == FAIL for c in found)


def render_checks(found: Iterable[Check]) -> str:
    """One line per check: status, name, what it saw, and after `->` what to do (escaped:
    what it saw may name other machines' nodes and links)."""
    rows = list(found)
    width = max((len(c.check) for c in rows), default=0)
    lines = []
    for c in rows:
        todo = f"  -> {c.do}" if c.do and c.status != OK else ""
        lines.append(escape(f"{c.status:<4}  {c.check:<{width}}  {c.saw}{todo}"))
    return "\n".join(lines)
