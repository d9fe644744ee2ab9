"""The kernel setup a mesh node needs, done by babblerd so that it harms nothing else on the
host (babeld runs with `skip-kernel-setup true`; DESIGN.md "babeld", kernel setup).

babeld's own setup turns IPv6 forwarding on for the whole host, and Linux then drops every
default route learned from router advertisements and ignores the RAs that follow (measured
with radvd: ../shared/BABELD.md); it also turns on `ip_forward`. So on Linux, in this order:
1. every other link that accepts RAs (`accept_ra` 1), and `default` for links that appear
   later, accepts them also while forwarding (`accept_ra` 2);
2. mesh links take no RAs and no redirects; while IPv4 runs they forward IPv4, with a loose
   reverse-path filter (a ring routes asymmetrically): per link, never `ip_forward`/`all`;
3. IPv6 forwarding on (Linux forwards IPv6 for all links or none).
On macOS (sysctl(8) names, global only): no redirects sent, then IPv6 forwarding, and IPv4
forwarding while IPv4 runs (docs/security.md says what macOS cannot promise).

Every change is recorded and put back, in reverse order: a setting the plan no longer wants
(a link that left the mesh, IPv4 refused) at once, everything when the mesh stops
(sysctls.py). What keeps the mesh's routes from other links is the fence (core/fence.py).
"""

from __future__ import annotations

from collections.abc import Iterable

import structlog

from babbler.core.links import Links
from babbler.core.platform import Platform
from babbler.daemon.sysctls import Sysctls

log = structlog.get_logger()

FORWARDING = "net/ipv6/conf/all/forwarding"
MESH_LINK = (
    ("net/ipv6/conf/{}/accept_ra", "0"),
    ("net/ipv6/conf/{}/accept_redirects", "0"),
    ("net/ipv4/conf/{}/accept_redirects", "0"),
    ("net/ipv4/conf/{}/send_redirects", "0"),
)
IPV4_LINK = (("net/ipv4/conf/{}/forwarding", "1"), ("net/ipv4/conf/{}/rp_filter", "2"))
# A link babblerd would use, from the moment it sees it (down too), so that its link-local
# is usable as it comes up instead of 1.1-2.8 s later (measured on veth: the kernel's random
# initial delay, then one probe a second). Optimistic DAD makes the address usable at once
# for babeld's multicast hellos, but Linux sends no neighbour solicitation from an
# optimistic link-local (ndisc_send_ns wants a settled one): unicast to the far end (IHUs,
# every packet routed over the cable) still waited 1.07-2.06 s in 5 of 5 runs. With DAD off
# it was 0.015 s. So both: DAD off (a cable has one other end, with an interface identifier
# of its own; effective where `all.accept_dad` is 0, the kernel's default), and optimistic
# where a host forces DAD on for all links.
CANDIDATE_LINK = (
    ("net/ipv6/conf/{}/accept_dad", "0"),
    ("net/ipv6/conf/{}/optimistic_dad", "1"),
    ("net/ipv6/conf/{}/use_optimistic", "1"),
)
DARWIN = (
    ("net.inet6.ip6.redirect", "0"),
    ("net.inet.ip.redirect", "0"),
    ("net.inet6.ip6.forwarding", "1"),
)
DARWIN_IPV4 = ("net.inet.ip.forwarding", "1")


def plan(
    accept_ra: dict[str, str],
    mesh: Iterable[str],
    ipv4: bool = False,
    selected: Iterable[str] = (),
) -> list[tuple[str, str]]:
    """Linux's settings to make, in order (pure): `accept_ra` holds the current value of
    each other link's (and `default`'s) `accept_ra`; `mesh` the mesh links in use; `ipv4`
    whether IPv4 runs on the mesh; `selected` the links babblerd would use, up or not."""
    out = [(key.format(name), value) for name in sorted(selected) for key, value in CANDIDATE_LINK]
    mesh = sorted(mesh)
    if not mesh:
        return out  # no link in use yet: no forwarding either
    out += [
        (f"net/ipv6/conf/{name}/accept_ra", "2")
        for name, value in sorted(accept_ra.items())
        if value == "1"
    ]
    per_link = MESH_LINK + (IPV4_LINK if ipv4 else ())
    out += [(key.format(name), value) for name in mesh for key, value in per_link]
    return [*out, (FORWARDING, "1")]


def plan_darwin(ipv4: bool) -> list[tuple[str, str]]:
    """macOS's settings to make, in order (pure)."""
    return [*DARWIN, *([DARWIN_IPV4] if ipv4 else [])]


def shown(name: str, value: str) -> str:
    """A setting as sysctl(8) takes it: `net.ipv6.conf.all.forwarding=1`."""
    return f"{name.replace('/', '.')}={value}"


class HostSetup:
    def __init__(self, sysctls: Sysctls, platform: Platform) -> None:
        self._sysctls = sysctls
        self._platform = platform
        self._made: list[str] = []  # what this setup set, in order
        self._said: set[str] = set()

    def _wanted(
        self, links: Links, mesh: set[str], ipv4: bool, selected: set[str]
    ) -> list[tuple[str, str]]:
        if not self._platform.per_link_settings:
            return plan_darwin(ipv4) if mesh else []
        # The host's own values, not the 2 set by an earlier pass: else the next pass would
        # put 1 back and set 2 again, a window without RAs while forwarding is on (seen in CI)
        names = [n for n, link in links.items() if n not in mesh and not link.is_loopback]
        others = {
            name: self._sysctls.underlying(f"net/ipv6/conf/{name}/accept_ra") or ""
            for name in [*names, "default"]
        }
        return plan(others, mesh, ipv4, selected)

    def apply(
        self,
        links: Links,
        mesh: set[str],
        skip: bool = False,
        ipv4: bool = False,
        selected: set[str] | None = None,
    ) -> list[str]:
        """Make the setup for the mesh links in use, and the `selected` links babblerd would
        use (mesh links by default); no mesh and none selected: put everything back.
        Returns what could not be set (`cannot set NAME=VALUE: why`), for the caller to say
        once (core/kernelhealth.py). Blocks: on macOS each setting runs sysctl(8)."""
        selected = mesh if selected is None else selected | mesh
        active = bool(mesh or selected)
        wanted = self._wanted(links, mesh, ipv4, selected) if active else []
        names = {name for name, _ in wanted}
        gone = [name for name in reversed(self._made) if name not in names]
        if gone:  # put back first: a link that left the mesh is read again as another link
            self._sysctls.restore(gone)
            self._made = [name for name in self._made if name in names]
            wanted = self._wanted(links, mesh, ipv4, selected) if active else []
        if skip:  # nothing changed; what is missing is said once
            missing = [(n, v) for n, v in wanted if n not in self._said]
            missing = [(n, v) for n, v in missing if self._sysctls.read(n) != v]
            if missing:
                settings = [shown(n, v) for n, v in missing]
                log.warning("--skip-kernel-setup: the mesh needs", settings=settings)
            self._said |= {n for n, _ in missing}
            return []
        problems = []
        for name, value in wanted:  # set() reads first and leaves a right value alone
            if not self._sysctls.set(name, value):
                why = (self._sysctls.problem or "").removeprefix(f"{name}: ")
                problems.append(f"cannot set {shown(name, value)}: {why}")
            elif name not in self._made:
                self._made.append(name)
        return problems

    def restore(self) -> None:
        """Put back what this setup set, forwarding first (the reverse of setting it)."""
        if self._made:
            self._sysctls.restore(list(reversed(self._made)))
            self._made = []
