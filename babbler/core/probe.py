"""`babblerctl doctor --probe` judged (pure): what each probe did (ctl/probe.py acts), told
as the doctor's lines `(check, status, saw, do)`, and the host's routes and addresses that
overlap the mesh's prefixes, each named with what owns it.

The probe goes in layers, and stops at the first that fails: each cable (a connect bound to
this end's cable address, to the far end's, and 1 MiB through it), each node's node address
in both families, the route each takes, and routes or addresses of the host inside the
mesh's prefixes. A connect that times out is told apart from one refused: a firewall that
drops answers nothing, a port nobody listens on is refused at once."""

from __future__ import annotations

import errno
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from ipaddress import IPv4Network, IPv6Network

from babbler.core.addressing import MESH_PREFIX
from babbler.core.ipv4 import HostRoute, clash

OK, WARN, FAIL = "ok", "warn", "fail"
Line = tuple[str, str, str, str]  # (check, status, saw, do), as the doctor's Check
MiB = 1 << 20
TIMEOUT = 2.0  # seconds each probe may take

# Who holds a route or address over the mesh's prefixes, by its interface's name (first
# match). macOS names every VPN's tunnel utunN (WireGuard, Tailscale, WARP, AnyConnect,
# GlobalProtect): the owner is then the range, if it is Tailscale's, or "a VPN".
OWNERS = (
    ("tailscale", "Tailscale"),
    ("wg", "WireGuard"),
    ("utun", "a VPN (utun)"),
    ("cscotun", "Cisco AnyConnect"),
    ("gpd", "GlobalProtect"),
    ("zt", "ZeroTier"),
    ("tun", "a VPN (tun)"),
    ("docker", "Docker"),
    ("br-", "a Docker network"),
    ("virbr", "libvirt"),
    ("podman", "Podman"),
    ("cni", "a container network (CNI)"),
    ("veth", "a container"),
)
TAILSCALE = (IPv4Network("100.64.0.0/10"), IPv6Network("fd7a:115c:a1e0::/48"))


@dataclass(frozen=True)
class HostEntry:
    """A route or address of the host, with the interface it is on."""

    network: IPv4Network | IPv6Network
    device: str
    what: str  # "route 10.77.9.0/24 dev tailscale0", "address 10.77.9.1/32 on utun3"
    kernel: bool = False  # an address, or the route the kernel made for one (connected)


@dataclass(frozen=True)
class Overlap:
    entry: HostEntry
    owner: str


def owner(entry: HostEntry) -> str:
    """Who holds it: Tailscale by its ranges, else by the interface's name; else unknown."""
    if any(entry.network.overlaps(r) for r in TAILSCALE if r.version == entry.network.version):
        return "Tailscale"
    name = entry.device.lower()
    for start, who in OWNERS:
        if name.startswith(start):
            return who
    return f"something on {entry.device}" if entry.device else "something on this host"


def overlaps(
    prefix_v4: IPv4Network | None,
    entries: Iterable[HostEntry],
    ours: Iterable[IPv4Network | IPv6Network] = (),
    prefix_v6: IPv6Network = MESH_PREFIX,
) -> list[Overlap]:
    """The host's routes and addresses inside the mesh's prefixes that are not the mesh's
    own (`ours`: its addresses and their connected routes), each with its owner. IPv4 goes
    through the daemon's clash check (core/ipv4.py), found one at a time."""
    own, listed = set(ours), list(entries)
    found: list[Overlap] = []
    pairs = [
        (HostRoute(e.network, e.what), e) for e in listed if isinstance(e.network, IPv4Network)
    ]
    if prefix_v4 is not None:
        own_v4 = [n for n in own if isinstance(n, IPv4Network)]
        while (hit := clash(prefix_v4, [r for r, _ in pairs], own_v4)) is not None:
            at = next(i for i, (r, _) in enumerate(pairs) if r is hit)
            found.append(Overlap(pairs[at][1], owner(pairs[at][1])))
            pairs = pairs[at + 1 :]
    for e in listed:
        v6 = isinstance(e.network, IPv6Network) and e.network.prefixlen > 0
        if v6 and e.network not in own and e.network.overlaps(prefix_v6):
            found.append(Overlap(e, owner(e)))
    return found


def overlap_lines(found: Sequence[Overlap], prefix_v4: IPv4Network | None) -> list[Line]:
    if not found:
        prefixes = f"{prefix_v4} or {MESH_PREFIX}" if prefix_v4 else str(MESH_PREFIX)
        return [("overlaps", OK, f"no route or address of this host inside {prefixes}", "")]
    out: list[Line] = []
    for o in found:
        if isinstance(o.entry.network, IPv4Network):
            what = f"inside the mesh's {prefix_v4}: babblerd withdraws IPv4 while it is there"
        else:
            what = f"inside the mesh's {MESH_PREFIX}: the mesh's traffic may go to it"
        out.append(("overlaps", FAIL, f"{o.entry.what} ({o.owner}) lies {what}", _overlap_fix(o)))
    return out


def _overlap_fix(o: Overlap) -> str:
    if isinstance(o.entry.network, IPv6Network):
        return f"move {o.owner} off {MESH_PREFIX} (babbler's IPv6 prefix is fixed)"
    return (
        f"move {o.owner}'s range off the mesh's, or start every node with another "
        "--ipv4-prefix (RFC 1918, /16 to /22) that it does not touch"
    )


# -- a connect, and what it found -----------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """One bounded connect (and, over a cable, 1 MiB sent), as ctl/probe.py saw it."""

    errno: int | None = None  # the connect's or the transfer's error; None: it went through
    timed_out: bool = False  # no answer within TIMEOUT
    seconds: float | None = None  # connect to the responder's answer, for the transfer
    nbytes: int = 0  # what the far end says it received
    said: str | None = None  # the far end's error answer ("busy")
    stage: str = "connect"  # where it stopped: "bind", "connect", "transfer"


def rate(nbytes: int, seconds: float) -> str:
    gbits = nbytes * 8 / seconds / 1e9 if seconds > 0 else 0.0
    return f"{nbytes / MiB:g} MiB in {seconds * 1000:.1f} ms, {gbits:.2f} Gbit/s"


def cause(
    outcome: Outcome, port: int, listener: str, far: str = "the far end"
) -> tuple[str, str, str]:
    """(status, what happened, what to do) for a connect that did not go through.
    `listener`: what should listen there ("its bench responder"); `far`: the node there."""
    code = outcome.errno
    if outcome.said is not None:
        if outcome.said == "busy":
            return WARN, "busy: a bench session runs there", "run the probe again after it"
        return FAIL, f"the far end answered: {outcome.said}", "babblerctl doctor there"
    if outcome.stage == "bind":
        return (
            FAIL,
            "this end's cable address is gone (cannot bind it)",
            "babblerd moves cable addresses as cables change: probe again",
        )
    if outcome.timed_out or code == errno.ETIMEDOUT:
        where = "to the far end" if outcome.stage == "connect" else "in the transfer"
        return (
            FAIL,
            f"dropped: no answer within {TIMEOUT:g} s {where} (a firewall that drops, "
            "not a port nobody listens on: that is refused at once)",
            f"let TCP port {port} in from the mesh at {far} (its firewall: nft, iptables, "
            f"pf, socketfilterfw), or a link that loses everything: babblerctl bench {far}",
        )
    if code == errno.ECONNREFUSED:
        return (
            FAIL,
            f"refused: nothing listens on port {port} there (or a firewall rejects)",
            f"{listener} is not running at {far}: babblerctl doctor there",
        )
    if code in (errno.EHOSTUNREACH, errno.ENETUNREACH):
        return (
            FAIL,
            "no route to it",
            "babblerctl nodes (is it reachable?); babblerctl doctor there",
        )
    if code in (errno.ECONNRESET, errno.EPIPE):
        return (
            FAIL,
            "the far end closed or reset the connection",
            "babblerctl doctor there; its log says why",
        )
    name = errno.errorcode.get(code or 0, str(code))
    return FAIL, f"failed ({name})", "babblerctl doctor there"


# -- the layers ------------------------------------------------------------------------------


@dataclass(frozen=True)
class CableProbe:
    interface: str
    far: str  # the far node, as messages name it
    near_address: str | None  # this end's cable address; None: it has none
    far_address: str | None
    outcome: Outcome | None = None  # None: not tried (no address)
    why_none: str = ""  # why there is no cable address (IPv4 refused, ...)


def cable_lines(probes: Sequence[CableProbe], port: int) -> list[Line]:
    out: list[Line] = []
    for p in probes:
        check = f"cable {p.interface}"
        if p.outcome is None or p.near_address is None or p.far_address is None:
            out.append(
                (
                    check,
                    FAIL,
                    f"to {p.far}: no cable address: {p.why_none or 'none given yet'}",
                    "IPv4 comes back by itself once nothing of the host lies in the prefix "
                    "(the overlaps line names what does); else babblerctl doctor there",
                )
            )
            continue
        o = p.outcome
        path = f"{p.near_address} to {p.far}'s {p.far_address}"
        if o.errno is None and not o.timed_out and o.said is None and o.seconds is not None:
            out.append((check, OK, f"{path}: {rate(o.nbytes, o.seconds)}", ""))
            continue
        status, saw, do = cause(o, port, "its bench responder (babblerd --bench on)", p.far)
        out.append((check, status, f"{path}: {saw}", do))
    return out


@dataclass(frozen=True)
class NodeProbe:
    name: str
    address: str  # IPv6 or IPv4 node address
    outcome: Outcome
    port: int  # IPv6: babblerd's node info; IPv4: the bench responder (all babblerd serves)


def node_lines(probes: Sequence[NodeProbe]) -> list[Line]:
    out: list[Line] = []
    for p in probes:
        family = "IPv4" if "." in p.address else "IPv6"
        check = f"node {p.name} {family}"
        o = p.outcome
        if o.errno is None and not o.timed_out:
            ms = f" in {o.seconds * 1000:.1f} ms" if o.seconds is not None else ""
            out.append((check, OK, f"{p.address} answers{ms}", ""))
            continue
        listener = (
            "its bench responder (babblerd --bench on)"
            if family == "IPv4"
            else ("its babblerd's node info (the mesh running)")
        )
        status, saw, do = cause(o, p.port, listener, p.name)
        out.append((check, status, f"{p.address}: {saw}", do))
    return out


@dataclass(frozen=True)
class RouteSeen:
    name: str
    address: str
    device: str | None  # the interface the route leaves by; None: no route
    error: str = ""  # what the route command said when it found none


def route_device(platform_key: str, output: str) -> str | None:
    """The interface in `ip route get` (Linux: `... dev v1x2 ...`) or `route -n get` (macOS:
    `interface: en5`) output; None when it names none."""
    words = output.split()
    if platform_key == "macos":
        for line in output.splitlines():
            key, _, value = line.strip().partition(":")
            if key == "interface" and value.strip():
                return value.strip()
        return None
    if "dev" in words[:-1]:
        return words[words.index("dev") + 1]
    return None


def route_lines(seen: Sequence[RouteSeen], cables: dict[str, str], loopback: str) -> list[Line]:
    """Each node address's route named by cable (`cables`: interface -> "v1x2 to n2"); a
    route that leaves by any other interface fails (a VPN or LAN route wins)."""
    out: list[Line] = []
    for r in seen:
        family = "IPv4" if "." in r.address else "IPv6"
        check = f"route {r.name} {family}"
        if r.device is None:
            out.append(
                (
                    check,
                    FAIL,
                    f"no route to {r.address}{': ' + r.error if r.error else ''}",
                    "babblerctl nodes (is it reachable?); babblerctl doctor there",
                )
            )
        elif r.device in cables:
            out.append((check, OK, f"{r.address} over cable {cables[r.device]}", ""))
        elif r.device == loopback:
            out.append((check, OK, f"{r.address} is this node's", ""))
        else:
            who = owner(HostEntry(IPv6Network("::/128"), r.device, ""))
            out.append(
                (
                    check,
                    FAIL,
                    f"{r.address} leaves by {r.device} ({who}), not a cable of the mesh",
                    f"a route of {who} wins over the mesh's: take it out of the mesh's "
                    "prefixes (the overlaps line names it)",
                )
            )
    return out


def failed(lines: Iterable[Line]) -> bool:
    return any(line[1] == FAIL for line in lines)
