"""`babblerctl web --listen` and what it answers (pure: no I/O): the ADDRESS:PORT it is given
(IPv6 in brackets), read into a `Listen` or refused in one line saying what to write; the
`--allow-host` names; and `refusal`, which turns away a request the page should not serve: a
Host a rebound DNS name would carry (`host_allowed`), or a request another web site's page made
(`cross_site`). babbler.live.web binds and serves."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv6Address, ip_address

from babbler.core.errors import BabblerError

DEFAULT_LISTEN = "127.0.0.1:8770"  # loopback: the page is this machine's own
_LABEL = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")
SAFE_SITES = ("same-origin", "none")  # Sec-Fetch-Site: the page itself; typed or bookmarked


@dataclass(frozen=True)
class Listen:
    host: IPv4Address | IPv6Address
    port: int

    @property
    def bind(self) -> str:
        """hypercorn's form, and a URL's: `127.0.0.1:8770`, `[::1]:8770`."""
        return (
            f"[{self.host}]:{self.port}" if self.host.version == 6 else f"{self.host}:{self.port}"
        )

    @property
    def loopback(self) -> bool:
        return self.host.is_loopback

    @property
    def url(self) -> str:
        return f"http://{self.bind}/"


def parse_listen(text: str) -> Listen:
    """`ADDRESS:PORT` (IPv6 in brackets) as given to --listen. Raises BabblerError saying
    what to write instead."""
    wanted = f"--listen wants ADDRESS:PORT, e.g. {DEFAULT_LISTEN} or [::1]:8770"
    if text.startswith("["):
        host, bracket, rest = text[1:].partition("]")
        if not bracket or not rest.startswith(":"):
            raise BabblerError(f"{wanted}, got {text!r}")
        port = rest[1:]
    else:
        host, colon, port = text.rpartition(":")
        if not colon or not host:
            raise BabblerError(f"{wanted}, got {text!r}")
        if ":" in host:
            raise BabblerError(f"--listen: write an IPv6 address in brackets ([{host}]:{port})")
    try:
        address = ip_address(host)
    except ValueError:
        raise BabblerError(f"--listen: {host!r} is not an IP address ({wanted})") from None
    if isinstance(address, IPv6Address) and not text.startswith("["):
        raise BabblerError(f"--listen: write an IPv6 address in brackets ([{host}]:{port})")
    if isinstance(address, IPv4Address) and text.startswith("["):
        raise BabblerError(f"{wanted}, got {text!r}")
    if not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
        raise BabblerError(f"--listen: the port must be 1-65535, got {port!r}")
    return Listen(address, int(port))


def parse_allow_host(text: str) -> str:
    """An --allow-host NAME: a DNS name (or an IP address) users reach the page by, without a
    port; lowercased, as `host_allowed` compares it. Raises BabblerError saying what to write."""
    name = text.strip().lower().removesuffix(".")
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    try:
        return str(ip_address(name))
    except ValueError:
        pass
    if ":" in name:
        raise BabblerError(f"--allow-host wants a name without a port (mesh.lan), got {text!r}")
    if len(name) > 253 or not all(_LABEL.fullmatch(label) for label in name.split(".")):
        raise BabblerError(f"--allow-host wants a DNS name such as mesh.lan, got {text!r}")
    return name


def _hostname(host_header: str) -> str:
    """A Host header's name, lowercased, without its port or brackets or a final dot."""
    host = host_header.strip().lower()
    host = host[1:].partition("]")[0] if host.startswith("[") else host.partition(":")[0]
    return host.removesuffix(".")


def host_allowed(host_header: str, listen: Listen, names: frozenset[str] = frozenset()) -> bool:
    """Whether a request's Host header may be served, whatever its port: one of `names`
    (--allow-host, from parse_allow_host), else on loopback a loopback name, else the --listen
    address itself (any address when that is 0.0.0.0 or [::]). A DNS name the user did not
    allow is refused: a web site the browser visits could rebind its own name to this address
    and read the mesh (DNS rebinding); an address in Host cannot be rebound."""
    host = _hostname(host_header)
    try:
        address: IPv4Address | IPv6Address | None = ip_address(host)
    except ValueError:
        address = None
    if (str(address) if address else host) in names:
        return True
    if listen.loopback:
        return host == "localhost" or (address is not None and address.is_loopback)
    return address is not None and (address == listen.host or listen.host.is_unspecified)


def cross_site(method: str, path: str, headers: Mapping[str, str]) -> bool:
    """Whether a browser sent this request for another site's page (`headers`: names
    lowercased). That page cannot read the answer, but it could keep /events open or ask
    /api/mesh in a loop, and keep babblerd asking every node for counters. Refused: a
    Sec-Fetch-Site other than same-origin or none (a same-site page is another port's or
    subdomain's), an Origin that is not the Host's own. Allowed: no such headers (curl,
    Prometheus), and following a link to the page itself (a top-level navigation to `/`:
    the user sees the page open, and the page is what a link to it is for)."""
    site = headers.get("sec-fetch-site")
    origin = headers.get("origin")
    if origin is not None and origin.lower() != f"http://{headers.get('host', '').lower()}":
        return True
    if site is None or site in SAFE_SITES:
        return False
    return not (
        method == "GET"
        and path == "/"
        and headers.get("sec-fetch-mode") == "navigate"
        and headers.get("sec-fetch-dest") == "document"
    )


def refusal(
    method: str,
    path: str,
    headers: Mapping[str, str],
    listen: Listen,
    names: frozenset[str] = frozenset(),
) -> tuple[int, str] | None:
    """The status and one-line body to refuse a request with, or None to serve it."""
    if not host_allowed(headers.get("host", ""), listen, names):
        return 421, "misdirected request: not a name this page answers (see --allow-host)\n"
    if cross_site(method, path, headers):
        return 403, "refused: a request from another site's page\n"
    return None
