"""The IPv6 kernel setup a mesh node needs, done by babblerd so that it harms nothing else
on the host (babeld runs with `skip-kernel-setup true`; DESIGN.md "babeld", kernel setup).

babeld's own setup turns IPv6 forwarding on for the whole host, and Linux then drops every
default route learned from router advertisements and ignores the RAs that follow (measured
with radvd: ../shared/BABELD.md). So, in this order:
1. every other link that accepts RAs (`accept_ra` 1), and `default` for links that appear
   later, accepts them also while forwarding (`accept_ra` 2);
2. mesh links take no RAs and no redirects;
3. IPv6 forwarding on (Linux forwards IPv6 for all links or none).
IPv4 forwarding is per mesh link (ipv4_service.py), never `ip_forward`. Every change is
recorded and put back, in reverse order, when the mesh stops (sysctls.py).
"""

from __future__ import annotations

from collections.abc import Iterable

import structlog

from babbler.core.links import Links
from babbler.core.platform import IS_LINUX
from babbler.daemon.sysctls import Sysctls

log = structlog.get_logger()

FORWARDING = "net/ipv6/conf/all/forwarding"
MESH_LINK = (
    ("net/ipv6/conf/{}/accept_ra", "0"),
    ("net/ipv6/conf/{}/accept_redirects", "0"),
    ("net/ipv4/conf/{}/accept_redirects", "0"),
    ("net/ipv4/conf/{}/send_redirects", "0"),
)


def plan(accept_ra: dict[str, str], mesh: Iterable[str]) -> list[tuple[str, str]]:
    """The settings to make, in order (pure): `accept_ra` holds the current value of each
    other link's (and `default`'s) `accept_ra`; `mesh` the mesh links in use."""
    out = [
        (f"net/ipv6/conf/{name}/accept_ra", "2")
        for name, value in sorted(accept_ra.items())
        if value == "1"
    ]
    out += [(key.format(name), value) for name in sorted(mesh) for key, value in MESH_LINK]
    return [*out, (FORWARDING, "1")]


class HostSetup:
    def __init__(self, sysctls: Sysctls) -> None:
        self._sysctls = sysctls
        self._made: list[str] = []  # what this setup set, in order
        self._said: set[str] = set()

    def apply(self, links: Links, mesh: set[str], skip: bool = False) -> None:
        """Make the setup for the mesh links in use (none: put everything back)."""
        if not IS_LINUX:
            return
        if not mesh:
            self.restore()
            return
        others = {
            name: self._sysctls.read(f"net/ipv6/conf/{name}/accept_ra") or ""
            for name, link in links.items()
            if name not in mesh and not link.is_loopback
        }
        others["default"] = self._sysctls.read("net/ipv6/conf/default/accept_ra") or ""
        wanted = plan(others, mesh)
        if skip:  # nothing changed; what is missing is said once
            missing = [(n, v) for n, v in wanted if n not in self._said]
            missing = [(n, v) for n, v in missing if self._sysctls.read(n) != v]
            if missing:
                settings = [f"{n.replace('/', '.')}={v}" for n, v in missing]
                log.warning("--skip-kernel-setup: the mesh needs", settings=settings)
            self._said |= {n for n, _ in missing}
            return
        for name, value in wanted:  # set() reads first and leaves a right value alone
            if not self._sysctls.set(name, value):
                log.warning("cannot set", setting=name, error=self._sysctls.problem)
            elif name not in self._made:
                self._made.append(name)

    def restore(self) -> None:
        """Put back what this setup set, forwarding first (the reverse of setting it)."""
        if self._made:
            self._sysctls.restore(list(reversed(self._made)))
            self._made = []
